"""Redis ``adopt`` when the reply to one of its pages is lost: the tokens that page minted are
unknown, and a resend of the page would step over them (past the ceiling its first page
read); the whole pass runs again, so every live lease comes back with a token that is
current. Through the reply-dropping proxy, on a server of its own."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from runyard import ManualClock, QueuePolicy
from runyard.errors import LeaseLostError
from runyard.models import NewItem
from runyard.redis import AsyncRedisWorkQueue

from tests._async.redis_support import fresh_settings
from tests.support.proxy import ReplyDroppingProxy, running_proxy
from tests.support.redis_plugin import AsyncClients, RedisTarget

LIVE = 1500  # two pages of adopt's scan (1,000 index entries a script)


@pytest_asyncio.fixture
async def proxy(dedicated_redis_target: RedisTarget) -> AsyncIterator[ReplyDroppingProxy]:
    with running_proxy(dedicated_redis_target.port) as proxy:
        yield proxy


@pytest.mark.asyncio
async def test_a_lost_reply_to_a_later_page_of_adopt_loses_no_lease(
    proxy: ReplyDroppingProxy,
) -> None:
    client = AsyncClients.for_target(RedisTarget("server", port=proxy.port))
    queue = AsyncRedisWorkQueue(
        client,
        clock=ManualClock(),
        settings=fresh_settings(),
        policy=QueuePolicy(lease_seconds=60),
        owns_client=True,
    )
    async with queue:
        for start in range(0, LIVE, 500):
            batch = [NewItem(payload={}, item_id=f"x{i:05d}") for i in range(start, start + 500)]
            await queue.enqueue_many("acme", batch)
        held = await queue.claim_many("w", limit=LIVE)
        pages: list[str] = []
        real = queue._script

        async def script(name: str, args: Any, **options: Any) -> Any:
            if name == "adopt":
                pages.append(args[5])  # its "after": '' for a first page
                if len(pages) == 2:
                    proxy.drop_next_reply()  # the second page runs; its reply is lost
            return await real(name, args, **options)

        queue._script = script  # type: ignore[method-assign]
        adopted = await queue.adopt("w", limit=2 * LIVE)
        assert proxy.dropped == 1 and pages[2] == ""  # a new pass, from the start
        assert sorted(lease.item_id for lease in adopted) == sorted(x.item_id for x in held)
        [stale] = await queue.complete_many(held[:1])  # the token before the adopt
        assert isinstance(stale, LeaseLostError)
        assert await queue.complete_many(adopted) == [None] * LIVE  # every token current
