"""A small asyncio TCP proxy that can lose a reply: it forwards a request to the server, lets
the server run it, then swallows the reply and drops the client's connection.

It runs its own event loop in a background thread, so blocking and asyncio tests share it.
(toxiproxy and tc netem are not available here; see RELIABILITY.md.)
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass

from tests.support.servers import free_port

__all__ = ["ReplyDroppingProxy", "running_proxy"]


@dataclass
class _Connection:
    dropping: bool = False


class ReplyDroppingProxy:
    """Forwards 127.0.0.1:``port`` to ``target_port``; ``drop_next_reply()`` arms one loss."""

    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self.port = free_port()
        self.dropped = 0
        self._armed = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.AbstractServer | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def start(self) -> None:
        """Start listening (returns once the proxy accepts connections)."""
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(self._listen(), self._loop)
        future.result(timeout=10)

    def stop(self) -> None:
        """Stop listening, drop every connection and end the proxy's thread."""
        asyncio.run_coroutine_threadsafe(self._close(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    def drop_next_reply(self) -> None:
        """The next request any client sends reaches the server; its reply never comes back."""
        self._armed.set()

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)

    async def _close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = _Connection()
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        tasks = [
            asyncio.ensure_future(self._requests(reader, up_writer, conn)),
            asyncio.ensure_future(self._replies(up_reader, writer, conn)),
        ]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            for w in (writer, up_writer):
                with contextlib.suppress(Exception):
                    w.transport.abort()

    async def _requests(
        self, reader: asyncio.StreamReader, up: asyncio.StreamWriter, conn: _Connection
    ) -> None:
        while data := await reader.read(65536):
            if self._armed.is_set() and not conn.dropping:
                self._armed.clear()
                conn.dropping = True
            up.write(data)
            await up.drain()

    async def _replies(
        self, up: asyncio.StreamReader, writer: asyncio.StreamWriter, conn: _Connection
    ) -> None:
        while data := await up.read(65536):
            if conn.dropping:
                # The server has run the request and answered: lose the answer.
                self.dropped += 1
                return
            writer.write(data)
            await writer.drain()


@contextlib.contextmanager
def running_proxy(target_port: int) -> Iterator[ReplyDroppingProxy]:
    """A started proxy to ``target_port``, stopped on exit."""
    proxy = ReplyDroppingProxy(target_port)
    proxy.start()
    try:
        yield proxy
    finally:
        proxy.stop()
