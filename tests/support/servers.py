"""Reaching the machine's servers, and what a missing one means (CI: failure; else: skip)."""

from __future__ import annotations

import os
import socket

import pytest

__all__ = ["free_port", "in_ci", "port_open", "require_server"]


def in_ci() -> bool:
    """True under CI (``CI=true``), where a missing server is a failure, never a skip."""
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    """True when something accepts TCP connections on ``host:port``."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def require_server(name: str, host: str, port: int) -> None:
    """Fail (under CI) or skip (elsewhere) when the server is not reachable."""
    if port_open(host, port):
        return
    message = f"{name} is not reachable on {host}:{port}"
    if in_ci():
        pytest.fail(f"{message}; under CI=true a missing server is a failure", pytrace=False)
    pytest.skip(message)


def free_port() -> int:
    """Return a loopback TCP port that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
