"""The layout's rules: a folder per part, no backend importing another, small modules."""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src_async" / "runyard"
SYNC = ROOT / "src_sync" / "runyard" / "_sync"
BACKENDS = ("memory", "redis", "postgres", "sqlite")
MAX_LINES = 420
# Names that must never survive into a generated twin.
ASYNC_LEFTOVERS = {"async", "await", "asyncio", "anyio", "Awaitable", "Coroutine", "AsyncMock"}


def _backend_of_module(module: str) -> str | None:
    parts = module.split(".")
    if len(parts) >= 2 and parts[0] == "runyard" and parts[1] in BACKENDS:
        return parts[1]
    if len(parts) >= 3 and parts[:2] in (["runyard", "_async"], ["runyard", "_sync"]):
        return parts[2] if parts[2] in BACKENDS else None
    return None


def _backend_files() -> list[tuple[str, Path]]:
    files = []
    for backend in BACKENDS:
        for folder in (PACKAGE / backend, PACKAGE / "_async" / backend, SYNC / backend):
            files += [(backend, path) for path in sorted(folder.rglob("*.py"))]
    return files


def _imported_modules(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
            found += [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
    return found


def cross_backend_imports(files: list[tuple[str, Path]], root: Path = ROOT) -> list[str]:
    """Return 'file imports module' for every import of another backend's modules."""
    problems = []
    for backend, path in files:
        for module in _imported_modules(path):
            other = _backend_of_module(module)
            if other is not None and other != backend:
                problems.append(f"{path.relative_to(root)} imports {module}")
    return sorted(set(problems))


def test_every_backend_has_its_folders() -> None:
    for backend in ("memory", "redis", "postgres"):
        assert (PACKAGE / backend / "__init__.py").is_file(), backend
        assert (PACKAGE / "_async" / backend / "__init__.py").is_file(), backend


def test_no_backend_imports_another_backends_modules() -> None:
    files = _backend_files()
    assert len(files) > 30
    assert cross_backend_imports(files) == []


def test_the_import_check_catches_a_cross_backend_import(tmp_path: Path) -> None:
    offender = tmp_path / "state.py"
    offender.write_text("from runyard.memory.state import MemoryStateCore\nimport runyard.redis\n")
    fine = tmp_path / "keys.py"
    fine.write_text("from runyard._checks import check_limit\nfrom runyard.redis import keys\n")
    problems = cross_backend_imports([("postgres", offender), ("redis", fine)], root=tmp_path)
    assert problems == [
        "state.py imports runyard.memory.state",
        "state.py imports runyard.memory.state.MemoryStateCore",
        "state.py imports runyard.redis",
    ]


@pytest.mark.parametrize(
    "folder", [PACKAGE, ROOT / "codegen"], ids=lambda p: p.relative_to(ROOT).as_posix()
)
def test_no_module_is_over_the_size_signal(folder: Path) -> None:
    sizes = {
        path.relative_to(ROOT).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for path in folder.rglob("*.py")
    }
    assert {path: n for path, n in sizes.items() if n > MAX_LINES} == {}


def _leftovers(source: str) -> list[str]:
    return [
        f"line {token.start[0]}: {token.string}"
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type == tokenize.NAME and token.string in ASYNC_LEFTOVERS
    ]


@pytest.mark.parametrize("tree", [SYNC, ROOT / "tests" / "_sync"], ids=["src_sync", "tests_sync"])
def test_generated_twins_hold_no_async_leftover(tree: Path) -> None:
    files = sorted(tree.rglob("*.py"))
    assert files
    found = {
        path.relative_to(ROOT).as_posix(): hits
        for path in files
        if (hits := _leftovers(path.read_text(encoding="utf-8")))
    }
    assert found == {}


def test_the_leftover_check_catches_an_await() -> None:
    assert _leftovers("async def f():\n    await g()\n") == ["line 1: async", "line 2: await"]
    assert _leftovers("def f():\n    return 'await in a string'\n") == []
