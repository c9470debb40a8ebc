"""The README's quickstart runs as written, in both flavours."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _python_blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(encoding="utf-8"), flags=re.S)


def test_readme_opens_with_the_demo_and_test_commands() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    commands = [line.split("#")[0].strip() for line in lines[:6] if line.startswith("make ")]
    assert commands == ["make demo", "make test"]


def test_ci_runs_the_readme_test_command() -> None:
    assert "\nmake test\n" in (ROOT / ".ci/run").read_text(encoding="utf-8")


def test_readme_quickstart_runs_in_both_flavours() -> None:
    async_block, sync_block = _python_blocks(ROOT / "README.md")[:2]
    namespace: dict[str, object] = {}
    exec(compile(async_block, "README-async", "exec"), namespace)
    asyncio.run(namespace["main"]())  # type: ignore[operator]
    sync_namespace: dict[str, object] = {}
    exec(compile(sync_block, "README-sync", "exec"), sync_namespace)
    assert sync_namespace["lease"] is not None
