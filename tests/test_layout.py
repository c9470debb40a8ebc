"""The layout's rules: a folder per part, no backend importing another, small modules."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src_async" / "runyard"
SYNC = ROOT / "src_sync" / "runyard" / "_sync"
BACKENDS = ("memory", "redis", "postgres", "sqlite")
MAX_LINES = 420
# Words that must never survive into a generated twin (its header, which names the async
# source, excepted): keywords, async libraries, coroutine types, and the async names the
# generator renames. `asyncpg` is a driver's name, not a leftover.
ASYNC_LEFTOVER_RE = re.compile(
    r"\b(?!asyncpg\b)(async|await|asyncio|anyio|trio|Coroutine|Awaitable|AsyncMock|aclose"
    r"|__a(?:enter|exit|iter|next)__|AsyncIterator|pytest_asyncio|async_\w+|_?Async[A-Z]\w*)\b"
)
HEADER_LINES = 2
MODULE_IN_TEXT_RE = re.compile(r"\brunyard(?:\.\w+)+")


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


def _module_name(path: Path) -> str:
    """The dotted name a file imports as (either root), e.g. ``runyard._sync.redis.state``."""
    for root in (ROOT / "src_async", ROOT / "src_sync"):
        if path.is_relative_to(root):
            parts = list(path.relative_to(root).with_suffix("").parts)
            return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    return path.stem


def _top_level_home(name: str) -> str:
    """Where a name imported from ``runyard`` itself really lives."""
    import runyard

    value = getattr(runyard, name, None)
    return getattr(value, "__module__", "runyard") or "runyard"


def _imported_modules(path: Path, module: str | None = None) -> list[str]:
    """Every module the file imports: absolute, relative (resolved), names taken from the
    ``runyard`` top level (by the module they live in), and dotted module paths in strings
    (lazy facades, importlib)."""
    module = module or _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            found.append(base)
            for alias in node.names:
                found.append(f"{base}.{alias.name}")
                if base == "runyard":
                    found.append(_top_level_home(alias.name))
        elif isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            found += MODULE_IN_TEXT_RE.findall(node.value)
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
    offender.write_text(
        "from runyard.memory.state import MemoryStateCore\n"
        "import runyard.redis\n"
        "from runyard import MemoryStateStore\n"
        "LAZY = {'X': 'runyard._sync.sqlite.queue'}\n"
    )
    fine = tmp_path / "keys.py"
    fine.write_text("from runyard.validation import check_limit\nfrom runyard.redis import keys\n")
    problems = cross_backend_imports([("postgres", offender), ("redis", fine)], root=tmp_path)
    assert problems == [
        "state.py imports runyard._sync.memory.state",
        "state.py imports runyard._sync.sqlite.queue",
        "state.py imports runyard.memory.state",
        "state.py imports runyard.memory.state.MemoryStateCore",
        "state.py imports runyard.redis",
    ]


def test_relative_imports_are_resolved_before_the_check(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("from ..memory.state import MemoryStateCore\nfrom . import keys\n")
    modules = _imported_modules(probe, module="runyard.redis.probe")
    assert "runyard.memory.state" in modules and "runyard.redis.keys" in modules
    assert _backend_of_module("runyard.memory.state") == "memory"


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
    """Every leftover word below the header, in code, strings, docstrings and comments alike."""
    return [
        f"line {number}: {match.group(0)}"
        for number, line in enumerate(source.splitlines(), start=1)
        if number > HEADER_LINES
        for match in ASYNC_LEFTOVER_RE.finditer(line)
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


def test_the_leftover_check_catches_what_the_generator_must_rename() -> None:
    header = "# GENERATED from src_async/runyard/_async/x.py\n# do not edit\n"
    assert _leftovers(header + "async def f():\n    await g()\n") == [
        "line 3: async",
        "line 4: await",
    ]
    assert _leftovers(header + "x = AsyncRedisStore()\nimport trio\n") == [
        "line 3: AsyncRedisStore",
        "line 4: trio",
    ]
    assert _leftovers(header + 'm = f"{self.aclose}"  # see __aenter__\n') == [
        "line 3: aclose",
        "line 3: __aenter__",
    ]
    assert _leftovers(header + "import asyncpg\nx = 'sync code'\n") == []
