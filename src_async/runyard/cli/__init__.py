"""The ``runyard`` command: ``runyard demo`` shows tenant-fair work on the memory backend."""

from __future__ import annotations

import sys

__all__ = ["main"]


def main() -> None:
    """Entry point of the ``runyard`` console script (needs the cli extra: typer and rich)."""
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
