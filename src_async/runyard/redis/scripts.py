"""The Lua scripts, loaded once from ``runyard/redis/lua/<part>/`` and shared by both twins."""

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


def _read(part: str, name: str) -> str:
    return (
        resources.files("runyard.redis")
        .joinpath("lua")
        .joinpath(part)
        .joinpath(f"{name}.lua")
        .read_text(encoding="utf-8")
    )


def load_scripts(part: str, names: tuple[str, ...]) -> dict[str, LuaScript]:
    """Read each script of ``lua/<part>/`` with the part's ``prelude.lua`` in front of it, and
    its SHA1 (for EVALSHA)."""
    head = _read(part, "prelude")
    scripts = {}
    for name in names:
        text = f"{head}\n{_read(part, name)}"
        sha = hashlib.sha1(text.encode("utf-8"), usedforsecurity=False).hexdigest()
        scripts[name] = LuaScript(name, text, sha)
    return scripts


STATE_SCRIPTS = load_scripts(
    "state",
    (
        "put_run",
        "patch_run",
        "delete_run",
        "read_runs",
        "read_write",
        "put_session",
        "delete_session",
        "delete_session_runs",
        "acquire_lease",
        "renew_lease",
        "release_lease",
        "get_lease",
        "prune_leases",
        "prune_session_runs",
    ),
)
QUEUE_SCRIPTS = load_scripts(
    "queue",
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
        "enqueue_many",
        "claim_many",
        "heartbeat_many",
        "settle_many",
        "cancel",
        "purge_dead",
        "prune",
        "get_item",
    ),
)
