"""Counting the commands a client sends to a dedicated redis-server.

``INFO commandstats`` deltas count a script's own ``redis.call``s too, so the count of what the
client itself sent is read from MONITOR, where a script's calls are marked ``lua``; the
commandstats delta is kept beside it. No timing: the count ends at a marker command.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import redis

__all__ = ["SentCommands", "counting_commands"]


@dataclass
class SentCommands:
    """What clients sent while counting: ``sent`` from MONITOR, ``stats`` from commandstats;
    ``scripted`` holds the commands scripts ran, each with its arguments, as MONITOR shows them;
    ``sent_with_arguments`` the clients' own commands the same way."""

    sent: list[str] = field(default_factory=list)
    sent_with_arguments: list[str] = field(default_factory=list)
    scripted: list[str] = field(default_factory=list)
    stats: Counter[str] = field(default_factory=Counter)


def _commandstats(client: redis.Redis) -> Counter[str]:
    info = client.info("commandstats")
    return Counter({k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in info.items()})


@contextmanager
def counting_commands(port: int) -> Iterator[SentCommands]:
    """Count the top-level commands sent to the server on ``port`` inside the block."""
    result = SentCommands()
    control = redis.Redis(port=port)
    before = _commandstats(control)
    monitor_client = redis.Redis(port=port)
    marker = f"runyard-count-{uuid.uuid4().hex}"
    with monitor_client.monitor() as monitor:  # type: ignore[no-untyped-call]
        yield result
        control.echo(marker)
        while True:
            entry = monitor.next_command()
            command = str(entry["command"])
            if marker in command:
                break
            if entry.get("client_type") == "lua":
                result.scripted.append(command)
                continue
            result.sent.append(command.split(" ", 1)[0].lower())
            result.sent_with_arguments.append(command)
    after = _commandstats(control)
    result.stats = after - before
    result.stats.pop("info", None)
    result.stats.pop("echo", None)
    control.close()
    monitor_client.close()
