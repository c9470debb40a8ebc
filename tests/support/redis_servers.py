"""Redis servers the tests start themselves (loopback, free ports) and stop by pid."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis

from tests.support.servers import free_port, in_ci, port_open

__all__ = [
    "RedisProcess",
    "require_redis_binaries",
    "start_cluster",
    "start_redis",
]


def require_redis_binaries() -> None:
    """Fail (under CI) or skip when redis-server / redis-cli are not installed."""
    missing = [b for b in ("redis-server", "redis-cli") if shutil.which(b) is None]
    if not missing:
        return
    message = f"{', '.join(missing)} not installed"
    if in_ci():
        pytest.fail(f"{message}; under CI=true a missing server is a failure", pytrace=False)
    pytest.skip(message)


@dataclass
class RedisProcess:
    """A redis-server this test session started; ``stop()`` ends it by its pid."""

    port: int
    process: subprocess.Popen[bytes]
    workdir: Path
    extra: list[str] = field(default_factory=list)

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL) and remove its working directory."""
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
        shutil.rmtree(self.workdir, ignore_errors=True)


def _wait_ready(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"redis-server on port {port} exited with {process.returncode}")
        if port_open("127.0.0.1", port, timeout=0.2):
            try:
                with redis.Redis(port=port, socket_timeout=2) as client:
                    if client.ping():
                        return
            except redis.RedisError:
                pass
        time.sleep(0.05)
    raise RuntimeError(f"redis-server on port {port} did not start")


def start_redis(*args: str, port: int | None = None) -> RedisProcess:
    """Start a redis-server on 127.0.0.1 (persisting nothing unless ``args`` say otherwise)."""
    port = port or free_port()
    workdir = Path(tempfile.mkdtemp(prefix="runyard-redis-"))
    command = [
        "redis-server",
        "--bind",
        "127.0.0.1",
        "--port",
        str(port),
        "--dir",
        str(workdir),
        "--save",
        "",
        "--appendonly",
        "no",
        "--protected-mode",
        "no",
        *args,
    ]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_ready(port, process)
    except BaseException:
        RedisProcess(port, process, workdir).stop()
        raise
    return RedisProcess(port, process, workdir, list(args))


def _free_cluster_port(taken: set[int]) -> int:
    """A port p with p and its cluster bus port p + 10000 both free."""
    for _ in range(200):
        port = free_port()
        if port + 10000 > 65535:
            port = 20000 + port % 20000
        if port in taken or port + 10000 in taken:
            continue
        try:
            for p in (port, port + 10000):
                with socket.socket() as sock:
                    sock.bind(("127.0.0.1", p))
        except OSError:
            continue
        return port
    raise RuntimeError("no free port pair for a cluster node")


def start_cluster(masters: int = 3) -> list[RedisProcess]:
    """Start ``masters`` cluster-enabled redis-servers and join them into one cluster."""
    nodes: list[RedisProcess] = []
    taken: set[int] = set()
    try:
        for _ in range(masters):
            port = _free_cluster_port(taken)
            taken.update((port, port + 10000))
            nodes.append(
                start_redis(
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    f"nodes-{port}.conf",
                    "--cluster-node-timeout",
                    "5000",
                    port=port,
                )
            )
        addresses = [f"127.0.0.1:{n.port}" for n in nodes]
        subprocess.run(
            ["redis-cli", "--cluster", "create", *addresses, "--cluster-yes"],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=60,
        )
        _wait_cluster_ok(nodes)
    except BaseException:
        for node in nodes:
            node.stop()
        raise
    return nodes


def _wait_cluster_ok(nodes: list[RedisProcess]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        states = []
        for node in nodes:
            with redis.Redis(port=node.port, socket_timeout=2) as client:
                info = client.cluster("INFO")
            states.append(info.get("cluster_state") if isinstance(info, dict) else None)
        if all(s == "ok" for s in states):
            return
        time.sleep(0.1)
    raise RuntimeError("the test cluster did not reach cluster_state:ok")
