"""The twin generator: its rules, its --check mode, and its determinism across Pythons."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from codegen.__main__ import GenerationError, generate
from codegen.rules import RuleStats, TwinRule
from tests.support.servers import in_ci

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = '''"""AsyncThing wraps an AsyncClient."""
from collections.abc import AsyncIterator, Awaitable, Callable

from runyard._async.memory import AsyncMemoryStateStore
from runyard._flavours import AsyncLock, async_sleep


class AsyncThing:
    async def __aenter__(self) -> "AsyncThing":
        return self

    async def aclose(self, cb: Callable[[], Awaitable[int]]) -> None:
        async with AsyncLock():
            await async_sleep(0.1)
        value = await cb()
        print(f"AsyncThing closed {value}")
'''


def convert(source: str) -> tuple[str, RuleStats]:
    stats = RuleStats()
    return TwinRule("src_async", "src_sync", stats).convert(source), stats


def test_rules_turn_async_source_into_sync_source() -> None:
    text, stats = convert(SAMPLE)
    assert "class Thing:" in text
    assert 'def __enter__(self) -> "Thing":' in text
    assert "def close(self, cb: Callable[[], int]) -> None:" in text
    assert "with Lock():" in text and "sleep(0.1)" in text
    assert "from runyard._sync.memory import MemoryStateStore" in text
    assert "value = cb()" in text
    assert '"""Thing wraps an Client."""' in text
    assert "await" not in text and "async " not in text
    assert stats.fired["class:AsyncX"] >= 4 and stats.fired["generic:Awaitable[T]"] == 1


def test_f_strings_are_copied_untouched_on_every_python() -> None:
    text, _ = convert(SAMPLE)
    assert 'print(f"AsyncThing closed {value}")' in text


def test_pytest_asyncio_markers_and_fixtures_become_plain_pytest() -> None:
    source = (
        "import pytest\nimport pytest_asyncio\n\n\n@pytest_asyncio.fixture\n"
        "async def store():\n    yield 1\n\n\n@pytest.mark.asyncio\nasync def test_x(store):\n"
        "    assert store\n"
    )
    text, _ = convert(source)
    assert "import pytest_asyncio" not in text and "@pytest.mark.asyncio" not in text
    assert "@pytest.fixture\ndef store():" in text and "def test_x(store):" in text


def test_dead_rules_are_reported() -> None:
    _, stats = convert("x = 1\n")
    dead = stats.dead_rules()
    assert "name:aclose" in dead and "class:AsyncX" in dead


def _copy_tree(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    for rel in ("src_async", "src_sync", "tests/_async", "tests/_sync"):
        shutil.copytree(ROOT / rel, root / rel, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    return root


def _check(root: Path, python: str = sys.executable) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    # The generator's own dependencies (unasync, tokenize-rt, ruff) are pure Python or a
    # binary, so the venv's site-packages serves any interpreter.
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), sysconfig.get_paths()["purelib"]])
    return subprocess.run(
        [python, "-m", "codegen", "--check", "--root", str(root)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    )


def test_committed_twins_match_their_sources(tmp_path: Path) -> None:
    result = _check(_copy_tree(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "generated files match" in result.stdout


def test_a_hand_edit_in_the_sync_twin_is_caught(tmp_path: Path) -> None:
    root = _copy_tree(tmp_path)
    target = root / "src_sync/runyard/_sync/memory/state.py"
    target.write_text(target.read_text().replace("return self._core.get_run(key)", "return None"))
    result = _check(root)
    assert result.returncode == 1
    assert "hand-edited or stale: src_sync/runyard/_sync/memory/state.py" in result.stderr
    assert "+            return None" in result.stderr


def test_missing_and_extra_generated_files_are_caught(tmp_path: Path) -> None:
    root = _copy_tree(tmp_path)
    (root / "src_sync/runyard/_sync/pager.py").unlink()
    (root / "tests/_sync/test_orphan.py").write_text("x = 1\n")
    result = _check(root)
    assert result.returncode == 1
    assert "missing generated file: src_sync/runyard/_sync/pager.py" in result.stderr
    assert "extra file with no async source: tests/_sync/test_orphan.py" in result.stderr


def test_asyncio_surviving_into_a_twin_is_refused(tmp_path: Path) -> None:
    root = _copy_tree(tmp_path)
    bad = root / "src_async/runyard/_async/naps.py"
    bad.write_text("import asyncio\n\n\nasync def nap() -> None:\n    await asyncio.sleep(1)\n")
    with pytest.raises(GenerationError, match="asyncio survives"):
        generate(root, tmp_path / "out")


def _other_pythons() -> list[str]:
    """Interpreters of the other supported minor versions found here (pyenv's, then PATH's)."""
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    found = []
    for version in ("3.10", "3.12", "3.13"):
        candidates = sorted(pyenv.glob(f"{version}.*/bin/python{version}"))
        exe = str(candidates[-1]) if candidates else shutil.which(f"python{version}")
        if exe is not None:
            found.append(exe)
    return found


def test_every_other_supported_python_is_here_under_ci() -> None:
    found = _other_pythons()
    if len(found) < 3 and not in_ci():
        pytest.skip(f"only {found} found; the determinism check runs on those")
    assert len(found) == 3, f"CI must check determinism on 3.10, 3.12 and 3.13; found {found}"


@pytest.mark.slow
@pytest.mark.parametrize("python", _other_pythons())
def test_generation_is_identical_under_other_pythons(tmp_path: Path, python: str) -> None:
    probe = subprocess.run([python, "--version"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"{python} does not run here: {probe.stderr.strip()}")
    result = _check(_copy_tree(tmp_path), python)
    assert result.returncode == 0, result.stderr


def test_make_twins_removes_the_twin_of_a_deleted_source(tmp_path: Path) -> None:
    root = _copy_tree(tmp_path)
    (root / "src_async/runyard/_async/pager.py").rename(root / "src_async/runyard/_async/pg.py")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), sysconfig.get_paths()["purelib"]])
    result = subprocess.run(
        [sys.executable, "-m", "codegen", "--root", str(root)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    assert not (root / "src_sync/runyard/_sync/pager.py").exists()
    assert (
        (root / "src_sync/runyard/_sync/pg.py")
        .read_text()
        .startswith("# GENERATED by `make twins` from src_async/runyard/_async/pg.py")
    )
    assert _check(root).returncode == 0


def test_async_names_inside_an_f_string_are_refused(tmp_path: Path) -> None:
    root = _copy_tree(tmp_path)
    bad = root / "src_async/runyard/_async/naps.py"
    bad.write_text('def describe(x: object) -> str:\n    return f"needs an AsyncClient, not {x}"\n')
    with pytest.raises(GenerationError, match="AsyncClient inside an f-string"):
        generate(root, tmp_path / "out")


@pytest.mark.parametrize("name", ["AsyncGenerator", "asynccontextmanager", "anext", "aiter"])
def test_async_only_names_without_a_rule_are_refused_with_the_repair(
    tmp_path: Path, name: str
) -> None:
    root = _copy_tree(tmp_path)
    (root / "src_async/runyard/_async/naps.py").write_text(f"x = {name}\n")
    with pytest.raises(GenerationError, match=f"{name} has no sync twin; "):
        generate(root, tmp_path / "out")
