"""One distribution, two source roots: the wheel and the editable install carry both twins."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[1]
CHECK = """
import runyard, runyard.errors, runyard._sync.memory.state as s, runyard._async.memory.state as a
from runyard import MemoryStateStore, AsyncMemoryStateStore, RunKey
assert s.MemoryStateStore is MemoryStateStore and a.AsyncMemoryStateStore is AsyncMemoryStateStore
import runyard._sync.memory.state, runyard._memory
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


def _packages_on_disk() -> set[str]:
    found = set()
    for root, prefix in ((ROOT / "src_async", ""), (ROOT / "src_sync", "")):
        for init in root.rglob("__init__.py"):
            rel = init.parent.relative_to(root)
            if "__pycache__" not in rel.parts:
                found.add(prefix + ".".join(rel.parts))
    return found


def test_every_package_folder_is_listed_in_pyproject() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = set(config["tool"]["setuptools"]["packages"])
    assert listed == _packages_on_disk()
    package_dir = config["tool"]["setuptools"]["package-dir"]
    for name in listed:
        if name.startswith("runyard._sync"):
            assert package_dir[name] == "src_sync/" + name.replace(".", "/"), name


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
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(source),
            "--no-deps",
            "--no-build-isolation",
            "--quiet",
            "-w",
            str(dist),
        ],
        check=True,
        capture_output=True,
        cwd=tmp_path,
    )
    (wheel,) = dist.glob("runyard-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    generated = {
        "runyard/_sync/" + p.relative_to(ROOT / "src_sync/runyard/_sync").as_posix()
        for p in (ROOT / "src_sync/runyard/_sync").rglob("*.py")
    }
    assert generated and generated <= names, sorted(generated - names)
    assert "runyard/py.typed" in names
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
