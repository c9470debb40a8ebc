"""The Lua scripts, loaded once from ``runyard/lua/`` and shared by both twins."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources

__all__ = ["QUEUE_SCRIPTS", "STATE_SCRIPTS", "LuaScript", "load_scripts"]


@dataclass(frozen=True)
class LuaScript:
    """A script's name, full text (prelude included) and SHA1, the handle for ``EVALSHA``."""

    name: str
    text: str
    sha: str


def _read(name: str) -> str:
    return (
        resources.files("runyard")
        .joinpath("lua")
        .joinpath(f"{name}.lua")
        .read_text(encoding="utf-8")
    )


def load_scripts(names: tuple[str, ...], prelude: str) -> dict[str, LuaScript]:
    """Read each script with ``prelude`` in front of it, and its SHA1 (for EVALSHA)."""
    head = _read(prelude)
    scripts = {}
    for name in names:
        text = f"{head}\n{_read(name)}"
        sha = hashlib.sha1(text.encode("utf-8"), usedforsecurity=False).hexdigest()
        scripts[name] = LuaScript(name, text, sha)
    return scripts


STATE_SCRIPTS = load_scripts(
    (
        "put_run",
        "patch_run",
        "delete_run",
        "read_runs",
        "put_session",
        "delete_session",
        "acquire_lease",
        "renew_lease",
        "release_lease",
    ),
    "state_prelude",
)
QUEUE_SCRIPTS = load_scripts(
    (
        "enqueue",
        "claim",
        "heartbeat",
        "complete",
        "fail",
        "reap",
        "adopt",
        "requeue",
        "dead_letters",
        "stats",
    ),
    "queue_prelude",
)
