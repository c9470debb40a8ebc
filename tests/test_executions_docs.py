"""The examples in docs/executions.md run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "executions.md"


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)


def test_handler_example_runs_and_delivers_one_event(capsys: pytest.CaptureFixture[str]) -> None:
    handler_example = _python_blocks()[0]
    exec(compile(handler_example, "executions.md", "exec"), {})
    out = capsys.readouterr().out
    assert out.split() == ["1", "billing-7", "charge"]


def test_certification_example_defines_both_twins() -> None:
    namespace: dict[str, object] = {}
    exec(compile(_python_blocks()[2], "executions.md", "exec"), namespace)
    assert {"TestMyExecutionStore", "TestMySyncExecutionStore"} <= namespace.keys()
