"""One distribution, two source roots: the wheel and the editable install carry both twins."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHECK = """
import runyard, runyard.errors, runyard._sync.memory.state as s, runyard._async.memory.state as a
from runyard import MemoryStateStore, AsyncMemoryStateStore, RunKey
assert s.MemoryStateStore is MemoryStateStore and a.AsyncMemoryStateStore is AsyncMemoryStateStore
import runyard._sync.memory.state, runyard.memory.state
import runyard.redis.scripts, runyard.postgres.schema
assert runyard.redis.scripts.STATE_SCRIPTS['put_run'].text
assert 'CREATE TABLE' in runyard.postgres.schema.EXPECTED_SCHEMA
store = MemoryStateStore()
store.put_run(RunKey("t", "r"), {}, expected_version=0)
try:
    store.put_run(RunKey("t", "r"), {}, expected_version=0)
except runyard.errors.StateConflictError as exc:
    print("shared-error-ok", type(exc) is runyard.StateConflictError)
import runyard.testing
assert runyard.testing.StateStoreConformance.__module__ == "runyard._sync.testing.state"
print("site", runyard.__file__)
"""


def _setuptools_section(name: str) -> str:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    start = text.index(f"[{name}]\n") + len(name) + 3
    end = text.find("\n[", start)
    return text[start : end if end >= 0 else None]


def test_packages_are_discovered_from_two_roots_not_listed() -> None:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert "[tool.setuptools.packages.find]" in text
    assert "\npackages = [" not in text
    mapping = [
        line.strip()
        for line in _setuptools_section("tool.setuptools.package-dir").splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    assert mapping == [
        '"runyard" = "src_async/runyard"',
        '"runyard._sync" = "src_sync/runyard/_sync"',
    ]


def test_editable_install_serves_both_roots_with_shared_classes() -> None:
    import runyard._sync.memory.state as sync_state
    import runyard.errors

    assert Path(runyard.__file__).is_relative_to(ROOT / "src_async")
    assert Path(sync_state.__file__).is_relative_to(ROOT / "src_sync")
    assert sync_state.MemoryStateStore is runyard.MemoryStateStore
    assert runyard.errors.StateConflictError is runyard.StateConflictError


@pytest.mark.slow
def test_wheel_holds_both_twins_and_imports_in_a_fresh_venv(tmp_path: Path) -> None:
    # Build from a clean copy: a build/ folder left in the work tree would be reused and could
    # hide a package missing from pyproject.toml.
    source = tmp_path / "source"
    for rel in ("src_async", "src_sync"):
        shutil.copytree(ROOT / rel, source / rel, ignore=shutil.ignore_patterns("__pycache__"))
    for rel in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / rel, source / rel)
    dist = tmp_path / "dist"
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(source),
            "--no-deps",
            "--no-build-isolation",
            "--verbose",
            "-w",
            str(dist),
        ],
        check=True,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": ""},
    )
    log = build.stdout + build.stderr
    warnings = [line for line in log.splitlines() if "warning" in line.lower()]
    assert not warnings, "\n".join(warnings)
    (wheel,) = dist.glob("runyard-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    generated = {
        "runyard/_sync/" + p.relative_to(ROOT / "src_sync/runyard/_sync").as_posix()
        for p in (ROOT / "src_sync/runyard/_sync").rglob("*.py")
    }
    assert generated and generated <= names, sorted(generated - names)
    assert "runyard/py.typed" in names
    for folder, suffix in (
        ("runyard/redis/lua", ".lua"),
        ("runyard/postgres", ".sql"),
    ):
        on_disk = {
            "runyard/" + p.relative_to(ROOT / "src_async/runyard").as_posix()
            for p in (ROOT / "src_async" / folder).rglob(f"*{suffix}")
        }
        assert on_disk and on_disk <= names, sorted(on_disk - names)
    assert not any(
        n.startswith(("src_sync/", "src_async/", "runyard/_sync/__pycache__")) for n in names
    )

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--no-deps", str(wheel)],
        check=True,
        capture_output=True,
    )
    deps = sysconfig.get_paths()[
        "purelib"
    ]  # pydantic & co. from the dev venv, runyard from the wheel
    out = subprocess.run(
        [str(python), "-c", CHECK],
        check=True,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": deps, "PATH": "/usr/bin:/bin"},
        cwd=tmp_path,
    ).stdout
    assert "shared-error-ok True" in out
    assert str(venv) in out.split("site ", 1)[1]
