"""What kind of handler each twin runs: the thread twin never completes an item whose handler
returned an awaitable (its work never ran), the async twin fails a plain function's job
saying why; the CLI tells async callables (objects, wrappers) from plain ones and loads a
handler module from the working directory."""

from __future__ import annotations

import asyncio
import functools
import gc
import warnings
from pathlib import Path
from typing import Any

import pytest
from runyard import AsyncMemoryWorkQueue, ManualClock, MemoryWorkQueue, QueuePolicy
from runyard._async.worker import AsyncWorker
from runyard._sync.worker import Worker
from runyard.cli.worker import load_handler
from runyard.errors import ConfigurationError
from runyard.worker import Job

POLICY = QueuePolicy(max_attempts=1)


class AsyncCallable:
    def __init__(self) -> None:
        self.ran = 0

    async def __call__(self, job: Job) -> None:
        self.ran += 1


def test_the_thread_twin_fails_a_job_whose_handler_returned_a_coroutine() -> None:
    # It completed the item as done, the coroutine never awaited: the work was lost.
    queue = MemoryWorkQueue(policy=POLICY, clock=ManualClock())
    queue.enqueue("acme", {}, item_id="i")
    handler = AsyncCallable()
    with warnings.catch_warnings(record=True) as warned:  # no "was never awaited"
        warnings.simplefilter("always")
        stats = Worker(queue, handler).run_until_idle()
        gc.collect()
    assert [str(w.message) for w in warned if "never awaited" in str(w.message)] == []
    assert (stats.completed, stats.dead, handler.ran) == (0, 1, 0)
    (dead,) = queue.dead_letters("acme")
    assert dead.item.last_error is not None
    assert "TypeError: the handler returned coroutine, an awaitable" in dead.item.last_error


@pytest.mark.asyncio
async def test_the_async_twin_fails_a_plain_functions_job_saying_why() -> None:
    queue = AsyncMemoryWorkQueue(policy=POLICY, clock=ManualClock())
    await queue.enqueue("acme", {}, item_id="i")
    plain: Any = lambda job: None  # noqa: E731
    stats = await asyncio.wait_for(AsyncWorker(queue, plain).run_until_idle(), 30)
    assert (stats.completed, stats.dead) == (0, 1)
    (dead,) = await queue.dead_letters("acme")
    assert dead.item.last_error is not None
    assert "the handler returned NoneType, not an awaitable" in dead.item.last_error


async def _inner(job: Job) -> None:
    pass


def _wraps(function: Any) -> Any:
    @functools.wraps(function)
    def wrapper(job: Job) -> Any:
        return function(job)

    return wrapper


def _runs(function: Any) -> Any:
    """A sync adapter of a coroutine function (as syncer's and asyncer's are made)."""

    @functools.wraps(function)
    def wrapper(job: Job) -> None:
        asyncio.run(function(job))

    return wrapper


@pytest.mark.parametrize(
    ("handler", "kind"),
    [
        (AsyncCallable(), "async"),
        (functools.partial(AsyncCallable.__call__, AsyncCallable()), "async"),
        (_runs(_inner), "either"),  # wraps a coroutine function, runs it itself
        (_wraps(_inner), "either"),  # a decorator passing the coroutine on
        (_wraps(_runs), "sync"),  # wraps a plain function
    ],
    ids=["object", "partial", "sync-adapter", "decorator", "plain-wrapper"],
)
def test_the_cli_tells_an_async_callable_from_a_function(
    handler: Any, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A functools.wraps wrapper of a coroutine function may be a decorator passing the
    # coroutine on or a sync adapter running it: the CLI takes it either way (the twin that
    # meets the other kind fails its jobs saying so). Unwrapping refused the adapters with
    # --sync; judging the wrapper alone refused the decorators without it.
    monkeypatch.setattr("tests.support.worker_jobs.probe", handler, raising=False)
    spec = "tests.support.worker_jobs:probe"
    if kind != "either":
        refused = "is async: drop --sync" if kind == "async" else "is not async: pass --sync"
        with pytest.raises(ConfigurationError, match=refused):
            load_handler(spec, sync=kind == "async")
    for sync in (True, False) if kind == "either" else (kind == "sync",):
        assert load_handler(spec, sync=sync) is handler


@pytest.mark.asyncio
async def test_the_async_twin_runs_a_decorated_coroutine_function() -> None:
    queue = AsyncMemoryWorkQueue(policy=POLICY, clock=ManualClock())
    await queue.enqueue("acme", {}, item_id="i")
    ran: list[str] = []

    async def work(job: Job) -> None:
        ran.append(job.item_id)

    stats = await asyncio.wait_for(AsyncWorker(queue, _wraps(work)).run_until_idle(), 30)
    assert (stats.completed, ran) == (1, ["i"])


def test_the_thread_twin_runs_a_sync_adapter_of_a_coroutine_function() -> None:
    queue = MemoryWorkQueue(policy=POLICY, clock=ManualClock())
    queue.enqueue("acme", {}, item_id="i")
    ran: list[str] = []

    async def work(job: Job) -> None:
        ran.append(job.item_id)

    stats = Worker(queue, _runs(work)).run_until_idle()
    assert (stats.completed, ran) == (1, ["i"])


def test_the_cli_loads_a_handler_module_from_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The console script's sys.path starts with its own bin directory, not the working one.
    (tmp_path / "app_handlers_here.py").write_text("async def send(job):\n    pass\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.path", [p for p in __import__("sys").path if p not in ("", ".")])
    assert load_handler("app_handlers_here:send", sync=False).__name__ == "send"


def test_the_cli_shows_the_traceback_of_an_import_error_inside_the_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "broken_import_here.py").write_text(
        "import no_such_module_in_here\n\nasync def h(job):\n    pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigurationError) as caught:
        load_handler("broken_import_here:h", sync=False)
    said = str(caught.value)
    assert "importing broken_import_here raised ModuleNotFoundError" in said
    assert 'broken_import_here.py", line 1' in said
    with pytest.raises(ConfigurationError, match="no module named 'not_there_at_all'"):
        load_handler("not_there_at_all:h", sync=False)


@pytest.mark.asyncio
async def test_a_failures_log_line_is_one_bounded_line(caplog: pytest.LogCaptureFixture) -> None:
    # The line carried the exception's whole repr: a 100,000-character message made a log
    # line of 100,101 characters (the stored error is cut to 1,000).
    queue = AsyncMemoryWorkQueue(
        policy=QueuePolicy(max_attempts=2, backoff_base=0), clock=ManualClock()
    )
    await queue.enqueue("acme", {}, item_id="i")

    async def handler(job: Job) -> None:
        raise ValueError("x" * 100_000 + "\nsecond line")

    with caplog.at_level("WARNING", logger="runyard.worker"):
        stats = await asyncio.wait_for(AsyncWorker(queue, handler).run_until_idle(), 30)
    assert (stats.retried, stats.dead) == (1, 1)
    lines = [r.getMessage() for r in caplog.records if "item i" in r.getMessage()]
    assert [line.split(":")[0] for line in lines] == [
        "item i failed on attempt 1, will retry",
        "dead-lettered item i after attempt 2",
    ]
    for line in lines:
        assert "\n" not in line and len(line) < 400, len(line)
        assert "ValueError('xxx" in line and "more characters)" in line


@pytest.mark.asyncio
async def test_a_failing_hooks_log_line_is_bounded(caplog: pytest.LogCaptureFixture) -> None:
    # log.exception printed the hook's whole message and traceback: 100,374 characters.
    from runyard.worker import WorkerHooks

    queue = AsyncMemoryWorkQueue(policy=POLICY, clock=ManualClock())
    await queue.enqueue("acme", {}, item_id="i")

    def hook(job: Job) -> None:
        raise ValueError("x" * 100_000)

    async def handler(job: Job) -> None:
        pass

    worker = AsyncWorker(queue, handler, hooks=WorkerHooks(on_job_start=hook))
    with caplog.at_level("ERROR", logger="runyard.worker"):
        stats = await asyncio.wait_for(worker.run_until_idle(), 30)
    assert stats.completed == 1
    (line,) = [r.getMessage() for r in caplog.records if "worker hook" in r.getMessage()]
    assert "ValueError: xxx" in line and "more characters)" in line and "Traceback" in line
    assert len(line) < 20_000
    assert all(r.exc_info is None for r in caplog.records)
