"""A small asyncio TCP proxy that can lose a reply: it forwards a request to the server, lets
the server run it, then swallows the reply and drops the client's connection (optionally after
something else has happened on the server: another writer's call). It can also lose
a request (it never reaches the server), or hold one back and deliver it late (after the
client has given up on it and sent others). It can also play
a server that is away (a failover, a restart): the next N connections are refused, then it
forwards again, so a test counts attempts instead of timing them.

It runs its own event loop in a background thread, so blocking and asyncio tests share it.
(toxiproxy and tc netem are not available here; see RELIABILITY.md.)
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal

from tests.support.servers import free_port

__all__ = ["LOADING_REPLY", "ReplyDroppingProxy", "running_proxy"]

# What a restarted Redis answers while it loads its data (redis-py: BusyLoadingError).
LOADING_REPLY = b"-LOADING Redis is loading the dataset in memory\r\n"


@dataclass
class _Connection:
    dropping: bool = False
    held: bool = False


@dataclass
class _Held:
    """A request held back, the upstream connection it goes out on, and when it goes."""

    data: bytes
    up_reader: asyncio.StreamReader
    up_writer: asyncio.StreamWriter
    release_on: bytes


class ReplyDroppingProxy:
    """Forwards 127.0.0.1:``port`` to ``target_port``; ``drop_next_reply()`` arms one loss,
    ``refuse_connections(n)`` turns the next ``n`` connections away, ``drop_connections()``
    resets the open ones, ``partition()`` stops forwarding for good."""

    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self.port = free_port()
        self.dropped = 0
        self.refused = 0
        self.lost_requests = 0
        self.delivered_late = 0
        self.partitioned = False
        self.swallowed = 0  # requests and replies read while partitioned
        self._armed = threading.Event()
        self._then: Callable[[], None] | None = None
        self._request_loss: Literal["drop", "hold"] | None = None
        self._release_on = b""
        self._held: _Held | None = None
        self._refusals = 0
        self._refuse_how: Literal["loading", "reset"] = "loading"
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.AbstractServer | None = None
        self._handlers: set[asyncio.Task[None]] = set()
        self._open: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = set()
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

    def partition(self) -> None:
        """From now on nothing is forwarded either way and no connection is closed, new ones
        included: a network partition (a client waits until a timeout of its own, if any)."""
        self.partitioned = True

    def drop_next_reply(self, then: Callable[[], None] | None = None) -> None:
        """The next request any client sends reaches the server; its reply never comes back.

        ``then`` (blocking, run on a thread of its own) is called once the server has run the
        request and before the client's connection is dropped, so it happens before anything
        the client does about the loss (another writer's call, straight to the server)."""
        self._then = then
        self._armed.set()

    def drop_next_request(self, then: Callable[[], None] | None = None) -> None:
        """The next request any client sends never reaches the server; the client's
        connection is reset (it cannot tell whether the request ran), after ``then`` (as
        drop_next_reply's) has run."""
        with self._lock:
            self._request_loss = "drop"
            self._then = then

    def hold_next_request(self, release_on: bytes) -> None:
        """The next request any client sends is held back and the client's connection reset;
        the request reaches the server (on its own connection, its reply swallowed) just
        before the first later request holding ``release_on`` is forwarded: a write that
        lands late, after the client read back and sent it again."""
        with self._lock:
            self._request_loss = "hold"
            self._release_on = release_on

    def _take_request_loss(self) -> tuple[Literal["drop", "hold"] | None, bytes]:
        with self._lock:
            loss, self._request_loss = self._request_loss, None
            return loss, self._release_on

    async def _deliver_held(self) -> None:
        held, self._held = self._held, None
        if held is None:
            return
        held.up_writer.write(held.data)
        await held.up_writer.drain()
        await asyncio.wait_for(held.up_reader.read(65536), timeout=10)  # it ran; reply lost
        self.delivered_late += 1
        held.up_writer.transport.abort()

    def refuse_connections(self, n: int, how: Literal["loading", "reset"] = "loading") -> None:
        """Turn the next ``n`` connections away, then forward again; ``refused`` counts them.

        ``loading``: the connection is accepted and its first request answered with Redis's
        ``LOADING`` error (a server that restarted after a failover and is not serving yet:
        nothing ran). ``reset``: the connection is reset as soon as it is accepted (a load
        balancer whose backend is gone; the client cannot tell whether a request ran).
        """
        with self._lock:
            self._refusals = n
            self._refuse_how = how

    def drop_connections(self) -> int:
        """Reset every connection forwarded now (a network cut, a server restart), so a pool's
        idle and busy connections all break; return how many. New connections are forwarded
        (unless ``refuse_connections`` turns them away)."""
        future = asyncio.run_coroutine_threadsafe(self._drop_all(), self._loop)
        return future.result(timeout=10)

    async def _drop_all(self) -> int:
        open_now = list(self._open)
        for client, server in open_now:  # each pipe then ends and its handler returns
            client.transport.abort()
            server.transport.abort()
        return len(open_now)

    def _take_refusal(self) -> Literal["loading", "reset"] | None:
        with self._lock:
            if self._refusals <= 0:
                return None
            self._refusals -= 1
            self.refused += 1
            return self._refuse_how

    async def _refuse(
        self,
        how: Literal["loading", "reset"],
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        if how == "loading":
            with contextlib.suppress(OSError):
                if await reader.read(65536):
                    writer.write(LOADING_REPLY)
                    await writer.drain()
            writer.close()  # a graceful close: the client reads the reply, then the end
            with contextlib.suppress(OSError):
                await writer.wait_closed()
            return
        sock = writer.get_extra_info("socket")
        with contextlib.suppress(OSError):
            if sock is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)

    async def _close(self) -> None:
        if self._held is not None:
            self._held.up_writer.transport.abort()
            self._held = None
        if self._server is not None:
            self._server.close()
        # End every connection's handler while the loop still runs, so none is left to be
        # finalised (and to touch the loop) after the loop has closed.
        handlers = list(self._handlers)
        for handler in handlers:
            handler.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._handlers.add(task)
            task.add_done_callback(self._handlers.discard)
        if self.partitioned:
            while await reader.read(65536):
                self.swallowed += 1  # nothing reaches the server
            return
        refusal = self._take_refusal()
        if refusal is not None:
            await self._refuse(refusal, reader, writer)
            return
        conn = _Connection()
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        tasks = [
            asyncio.ensure_future(self._requests(reader, up_reader, up_writer, conn)),
            asyncio.ensure_future(self._replies(up_reader, writer, conn)),
        ]
        pair = (writer, up_writer)
        self._open.add(pair)
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._open.discard(pair)
            for pipe in tasks:
                pipe.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for w in (writer, up_writer):
                if w is up_writer and conn.held:
                    continue  # the held request goes out on it later
                with contextlib.suppress(Exception):
                    w.transport.abort()

    async def _requests(
        self,
        reader: asyncio.StreamReader,
        up_reader: asyncio.StreamReader,
        up: asyncio.StreamWriter,
        conn: _Connection,
    ) -> None:
        while data := await reader.read(65536):
            if self.partitioned:
                self.swallowed += 1
                continue
            loss, release_on = self._take_request_loss()
            if loss == "drop":
                self.lost_requests += 1
                then, self._then = self._then, None
                if then is not None:
                    await asyncio.get_running_loop().run_in_executor(None, then)
                return  # the handler resets both connections; the server never saw it
            if loss == "hold":
                conn.held = True
                self._held = _Held(data, up_reader, up, release_on)
                return  # the client's connection is reset; the upstream one is kept
            if self._held is not None and self._held.release_on in data:
                await self._deliver_held()
            if self._armed.is_set() and not conn.dropping:
                self._armed.clear()
                conn.dropping = True
            up.write(data)
            await up.drain()

    async def _replies(
        self, up: asyncio.StreamReader, writer: asyncio.StreamWriter, conn: _Connection
    ) -> None:
        while data := await up.read(65536):
            if self.partitioned:
                self.swallowed += 1
                continue
            if conn.dropping:
                # The server has run the request and answered: lose the answer.
                self.dropped += 1
                then, self._then = self._then, None
                if then is not None:
                    await asyncio.get_running_loop().run_in_executor(None, then)
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
