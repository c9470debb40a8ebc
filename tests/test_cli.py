"""The ``runyard`` command: the demo's outcome, and refusals of bad input."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console
from runyard.cli.app import _table, app
from runyard.cli.demo import DemoPlan, DemoResult
from runyard.sqlite import SqliteWorkQueue
from typer.testing import CliRunner


@pytest.fixture(autouse=True)
def _in_a_temporary_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The demo's default database (sqlite:///runyard.db) lands in the test's own folder."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RUNYARD_URL", raising=False)


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_demo_serves_every_item_and_shows_nobody_starved(flavour: str) -> None:
    result = CliRunner().invoke(app, ["demo", "--flavour", flavour, "--noisy-items", "40"])
    assert result.exit_code == 0, result.output
    assert "all 80 items done" in result.output and "quiet-4" in result.output


def test_a_single_noisy_item_is_not_reported_as_starvation() -> None:
    result = CliRunner().invoke(app, ["demo", "--noisy-items", "1", "--flavour", "sync"])
    assert result.exit_code == 0, result.output


def test_zero_workers_is_refused_naming_the_option() -> None:
    result = CliRunner().invoke(app, ["demo", "--workers", "0"])
    assert result.exit_code == 2 and "--workers" in result.output


def test_starvation_is_detected_when_quiet_items_come_after_the_rotation_bound() -> None:
    plan = DemoPlan(noisy_items=20, quiet_tenants=1, quiet_items=2, workers=1)
    fifo = DemoResult(plan=plan, flavour="test", served=["noisy"] * 20 + ["quiet-1"] * 2)
    fair = DemoResult(plan=plan, flavour="test", served=["noisy", "quiet-1"] * 2 + ["noisy"] * 18)
    assert fifo.quiet_tenants_starved() and not fair.quiet_tenants_starved()


def test_the_console_script_explains_a_missing_cli_extra() -> None:
    blocker = (
        "import sys, importlib.abc\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name == 'typer': raise ImportError('blocked', name='typer')\n"
        "sys.meta_path.insert(0, Block())\n"
        "from runyard.cli import main\n"
        "main()\n"
    )
    result = subprocess.run([sys.executable, "-c", blocker], capture_output=True, text=True)
    assert result.returncode == 2
    assert "pip install 'runyard[cli]'" in result.stderr and "typer" in result.stderr


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_demo_on_the_default_sqlite_file_finishes_a_killed_workers_items_exactly_once(
    flavour: str, tmp_path: Path
) -> None:
    args = ["demo", "--flavour", flavour, "--noisy-items", "20", "--quiet-items", "2"]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    assert (tmp_path / "runyard.db").exists()
    said = " ".join(first.output.split())  # rich wraps long lines
    assert "finished 2 of 6 items, then held 3 and was killed with SIGKILL" in said
    assert "6 of 6 done exactly once, 0 twice, 0 lost, 0 left" in said
    again = CliRunner().invoke(app, args)  # the same file again: earlier demos stay apart
    assert again.exit_code == 0, again.output
    assert "all 28 items done" in " ".join(again.output.split())


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_demo_on_a_file_holding_other_work_leaves_that_work_alone(
    flavour: str, tmp_path: Path
) -> None:
    """The demo's workers served the whole queue: run on the default file, they ran the
    demo's handler on the user's items (a KeyError, retried until dead-lettered; an item with
    "run" and "tokens" keys would have had the user's run marked done)."""
    with SqliteWorkQueue.open(tmp_path / "runyard.db", create_schema=True) as queue:
        queue.enqueue("acme", {"order": 42}, item_id="order-42")
        queue.enqueue("acme-2", {"run": "r", "tokens": 1}, item_id="looks-like-the-demos")
    args = ["demo", "--flavour", flavour, "--noisy-items", "20", "--quiet-items", "2"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "6 of 6 done exactly once, 0 twice, 0 lost, 0 left" in said, said
    with SqliteWorkQueue.open(tmp_path / "runyard.db") as queue:
        for tenant, item_id in (("acme", "order-42"), ("acme-2", "looks-like-the-demos")):
            item = queue.get_item(tenant, item_id)
            assert item is not None
            assert (item.state, item.attempts, item.last_error) == ("ready", 0, None)


def test_the_demo_table_shows_the_url_without_its_password() -> None:
    plan = DemoPlan(noisy_items=1, quiet_tenants=1, quiet_items=1, workers=1)
    result = DemoResult(plan=plan, flavour="sync", served=["noisy", "quiet-1"])
    console = Console(record=True, width=200)
    console.print(_table(result, "postgresql://app:S3CRET@127.0.0.1:5432/test"))
    shown = console.export_text()
    assert "S3CRET" not in shown and "postgresql://app:***@127.0.0.1:5432/test" in shown


def test_demo_on_a_file_another_writer_holds_exits_1_with_one_error_line(
    tmp_path: Path,
) -> None:
    # It printed a traceback: only a bad URL was caught.
    with SqliteWorkQueue.open(tmp_path / "runyard.db", create_schema=True):
        pass
    holder = sqlite3.connect(tmp_path / "runyard.db", isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        result = CliRunner().invoke(app, ["demo", "--noisy-items", "2", "--quiet-items", "1"])
    finally:
        holder.close()
    assert result.exit_code == 1, (result.output, result.exception)
    said = " ".join(result.output.split())
    assert "error: the SQLite write lock was not obtained within 5.0 s" in said, said
    assert "Traceback" not in said


def test_demo_on_memory_shows_no_crash_scene() -> None:
    result = CliRunner().invoke(app, ["demo", "--url", "memory://", "--noisy-items", "10"])
    assert result.exit_code == 0, result.output
    assert "SIGKILL" not in result.output


def test_demo_refuses_an_unknown_url_scheme_naming_the_known_ones() -> None:
    result = CliRunner().invoke(app, ["demo", "--url", "ftp://localhost"])
    assert result.exit_code == 2, result.output
    assert "'ftp'" in result.output and "sqlite://" in result.output


def test_worker_with_a_handler_that_cannot_load_exits_2_saying_why() -> None:
    result = CliRunner().invoke(app, ["worker", "no_such_module:handle", "--url", "memory://"])
    assert result.exit_code == 2 and "cannot load handler" in result.output


def test_worker_refuses_an_async_handler_with_sync() -> None:
    spec = "tests.support.worker_jobs:gated"
    result = CliRunner().invoke(app, ["worker", spec, "--url", "memory://", "--sync"])
    assert result.exit_code == 2 and "drop --sync" in result.output


def test_worker_refuses_an_unknown_url_scheme() -> None:
    spec = "tests.support.worker_jobs:gated"
    result = CliRunner().invoke(app, ["worker", spec, "--url", "ftp://x"])
    assert result.exit_code == 2 and "unknown queue URL scheme" in result.output


def test_worker_refuses_a_lease_longer_than_its_cap_naming_both() -> None:
    spec = "tests.support.worker_jobs:gated"
    options = ["--url", "memory://", "--lease-seconds", "4000"]
    result = CliRunner().invoke(app, ["worker", spec, *options])
    said = " ".join(result.output.split())
    assert result.exit_code == 2, (result.output, result.exception)
    assert "max_lease_seconds is below lease_seconds 4000" in said, said
    assert "lease_seconds <= max_lease_seconds" in said, said


def test_worker_with_a_handler_module_that_raises_on_import_exits_2_with_its_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "broken_handler.py").write_text(
        "def helper():\n    return {}['missing [key]']\n\n"
        "helper()\n\nasync def handle(job):\n    pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    result = CliRunner().invoke(app, ["worker", "broken_handler:handle", "--url", "memory://"])
    assert result.exit_code == 2, (result.output, result.exception)
    said = " ".join(result.output.split())
    assert "importing broken_handler raised KeyError: 'missing [key]'" in said, said
    assert "in helper" in said  # the traceback, where the import failed


def test_on_a_terminal_log_lines_are_written_above_the_status_line() -> None:
    import io
    import logging

    from runyard.cli.worker import _AboveStatus, _StatusLine

    out = io.StringIO()
    status = _StatusLine(out)
    out.write("\r   12.0 jobs/s     1 in flight  ")  # a status line, as its thread writes it
    handler = _AboveStatus(status)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    handler.emit(logging.makeLogRecord({"levelname": "WARNING", "msg": "item x failed"}))
    status.close()
    # The status line is cleared before the log line and after the last write.
    assert out.getvalue().endswith("\r\x1b[KWARNING item x failed\n\r\x1b[K")


@pytest.mark.parametrize("url", ["sqlite:runyard.db", "sqlite:///"])
def test_demo_refuses_a_sqlite_url_out_of_form_naming_the_forms(tmp_path: Path, url: str) -> None:
    result = CliRunner().invoke(app, ["demo", "--url", url, "--noisy-items", "10"])
    assert result.exit_code == 2, result.output
    assert "sqlite:////absolute/path.db" in result.output
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("url", ["sqlite:runyard.db", "sqlite:///"])
def test_worker_refuses_a_sqlite_url_out_of_form_naming_the_forms(tmp_path: Path, url: str) -> None:
    spec = "tests.support.worker_jobs:gated"
    result = CliRunner().invoke(app, ["worker", spec, "--url", url])
    assert result.exit_code == 2, result.output
    assert "sqlite:////absolute/path.db" in result.output
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("sync", [False, True])
def test_worker_refuses_a_bad_sqlite_table_prefix_naming_the_option(
    tmp_path: Path, sync: bool
) -> None:
    spec = "tests.support.worker_jobs:" + ("gated_sync" if sync else "gated")
    url = f"sqlite:///{tmp_path / 'x.db'}?table_prefix=App-"
    result = CliRunner().invoke(app, ["worker", spec, "--url", url, *(["--sync"] if sync else [])])
    assert result.exit_code == 2, result.output
    said = " ".join(result.output.split())
    assert "table_prefix='App-'" in said and "lower-case letters" in said, said
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_the_demos_doomed_worker_hands_back_other_tenants_items_untouched(
    flavour: str, tmp_path: Path
) -> None:
    # The demo may run on a file that holds other work: the worker it kills takes only the
    # crash tenant's items; another tenant's item a claim took goes back, attempt uncounted.
    from runyard import RunKey, Yard
    from runyard.cli.crash import DEMO_POLICY, kill, start_doomed_worker

    url = f"sqlite:///{tmp_path / 'shared.db'}"
    yard = Yard.from_url(url, policy=DEMO_POLICY)
    other = yard.queue.enqueue("someone-else", {"theirs": True})  # the oldest turn
    for n in range(6):
        yard.state.put_run(RunKey("crash", f"run-{n}"), {}, expected_version=0)
        yard.queue.enqueue("crash", {"run": f"run-{n}", "tokens": 1}, item_id=f"crash-{n}")
    doomed = start_doomed_worker(url, flavour, "crash", 2, 3)
    kill(doomed)
    assert len(doomed.finished) == 2 and len(doomed.held) == 3
    assert all(i.startswith("crash-") for i in doomed.finished + doomed.held)
    back = yard.queue.get_item("someone-else", other.item_id)
    assert back is not None and (back.state, back.attempts) == ("ready", 0)
    yard.close()
