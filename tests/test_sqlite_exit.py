"""An async SQLite yard never closed: the process exits at once, quietly, its commits kept.

aiosqlite (0.22) runs each connection on a thread that is not a daemon and reports every call
to the event loop of its caller. A yard never closed printed "RuntimeError: Event loop is
closed" tracebacks from that thread at exit (the connection collected and stopped after
``asyncio.run`` had closed its loop), or kept the interpreter from exiting at all (the thread
waiting, forever, for a next call). Each scenario runs in a child process.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from runyard import RunKey, Yard

SCRIPT = """
import asyncio, sys
from runyard import AsyncYard, ConfigurationError, RunKey

scenario, url = sys.argv[1], sys.argv[2]


async def write_some():
    yard = await AsyncYard.from_url(url)
    await yard.state.put_run(RunKey("acme", "r"), {"kept": True}, expected_version=0)
    await yard.queue.enqueue("acme", {"n": 1}, item_id="job-1")
    return yard


async def dropped():
    await write_some()  # the yard is dropped here, unclosed, while the loop still runs


async def still_writing():
    yard = await write_some()

    async def writer():
        while True:
            await yard.queue.enqueue("acme", {"more": True})

    asyncio.ensure_future(writer())  # cancelled by asyncio.run's end, mid-call or between
    for _ in range(20):
        await asyncio.sleep(0)


if scenario == "dropped":
    asyncio.run(dropped())
elif scenario == "kept":
    yard = asyncio.run(write_some())  # outlives its loop, which closed its connection
    try:
        asyncio.run(yard.state.get_run(RunKey("acme", "r")))
    except ConfigurationError as exc:
        print("after its loop:", "shut down" in str(exc))
elif scenario == "still writing":
    asyncio.run(still_writing())
elif scenario == "loop closed without shutdown":
    loop = asyncio.new_event_loop()
    yard = loop.run_until_complete(write_some())
    loop.close()  # no shutdown_asyncgens: nothing closes the connection
elif scenario == "loop left open":
    yard = asyncio.new_event_loop().run_until_complete(write_some())
print("end of script")
"""

SCENARIOS = ["dropped", "kept", "still writing", "loop closed without shutdown", "loop left open"]
SAFETY = 60.0  # a bound on a hang (the failure this file is about), not a timing


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_an_async_yard_never_closed_exits_quietly_and_keeps_its_commits(
    tmp_path: Path, scenario: str
) -> None:
    url = f"sqlite:///{tmp_path / 'yard.db'}"
    try:
        result = subprocess.run(
            [sys.executable, "-c", SCRIPT, scenario, url],
            capture_output=True,
            text=True,
            timeout=SAFETY,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the process did not exit (its connection's thread held it): {exc.stderr!r}")
    assert (result.returncode, result.stderr) == (0, ""), result.stderr
    assert result.stdout.splitlines()[-1] == "end of script"
    if scenario == "kept":
        assert result.stdout.splitlines()[0] == "after its loop: True"
    with Yard.from_url(url) as yard:
        run = yard.state.get_run(RunKey("acme", "r"))
        assert run is not None and run.blob == {"kept": True}
        assert yard.queue.get_item("acme", "job-1") is not None
