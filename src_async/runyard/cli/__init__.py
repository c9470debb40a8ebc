"""The ``runyard`` command: ``runyard demo`` shows tenant-fair work on the memory backend."""

from __future__ import annotations

import os
import signal
import sys
from types import FrameType

__all__ = ["main"]

EARLY_SIGNAL_LINE = "signal received before the worker started: exiting (nothing was held)"


_EARLY_PID: list[int] = []  # the process that installed _exit_at_once


def _exit_at_once(signum: int, frame: FrameType | None) -> None:
    if os.getpid() not in _EARLY_PID:
        # A child forked while the handler's module imported (a process pool): not the
        # worker. It gets Python's default for the signal, as if nothing were installed.
        signal.signal(
            signum, signal.default_int_handler if signum == signal.SIGINT else signal.SIG_DFL
        )
        os.kill(os.getpid(), signum)
        return
    os.write(2, (EARLY_SIGNAL_LINE + "\n").encode())
    os._exit(0)


def main() -> None:
    """Entry point of the ``runyard`` console script (needs the cli extra: typer and rich).

    ``runyard worker`` takes SIGTERM and SIGINT from here on: until the command installs its
    own handlers (before it opens the store), a signal ends the process at once with status
    0, since nothing is held yet, where Python's defaults would end it with 143 or a
    KeyboardInterrupt traceback while the command line or the handler's module (a web app's,
    often seconds long) is still being imported."""
    if sys.argv[1:2] == ["worker"]:
        _EARLY_PID.append(os.getpid())
        signal.signal(signal.SIGTERM, _exit_at_once)
        signal.signal(signal.SIGINT, _exit_at_once)
    try:
        from runyard.cli.app import app
    except ImportError as exc:
        print(
            f"runyard's command line needs the cli extra ({exc.name} is missing): "
            "pip install 'runyard[cli]'",
            file=sys.stderr,
        )
        sys.exit(2)
    app()
