"""The Redis backend, both twins: ``pip install runyard[redis]``. See docs/redis.md.

This folder holds what both twins share and is not I/O (settings, keys, reply decoding, preflight
decisions, the driver pair and the Lua scripts in ``lua/``); the I/O is in
``runyard._async.redis`` and its generated twin ``runyard._sync.redis``.
"""

from typing import TYPE_CHECKING

from runyard._lazy import lazy_dir, lazy_exports
from runyard.redis.settings import RedisStoreSettings

if TYPE_CHECKING:
    from runyard._async.redis import (
        AsyncRedisStateStore,
        AsyncRedisStore,
        AsyncRedisUpdates,
        AsyncRedisWorkQueue,
    )
    from runyard._async.redis.wakeup import AsyncRedisWakeup
    from runyard._sync.redis import RedisStateStore, RedisStore, RedisUpdates, RedisWorkQueue
    from runyard._sync.redis.wakeup import RedisWakeup

__all__ = [
    "AsyncRedisStateStore",
    "AsyncRedisStore",
    "AsyncRedisUpdates",
    "AsyncRedisWakeup",
    "AsyncRedisWorkQueue",
    "RedisStateStore",
    "RedisStore",
    "RedisStoreSettings",
    "RedisUpdates",
    "RedisWakeup",
    "RedisWorkQueue",
]

_LAZY = {
    **dict.fromkeys(
        ("AsyncRedisStateStore", "AsyncRedisStore", "AsyncRedisUpdates", "AsyncRedisWorkQueue"),
        "runyard._async.redis",
    ),
    **dict.fromkeys(
        ("RedisStateStore", "RedisStore", "RedisUpdates", "RedisWorkQueue"), "runyard._sync.redis"
    ),
    "AsyncRedisWakeup": "runyard._async.redis.wakeup",
    "RedisWakeup": "runyard._sync.redis.wakeup",
}
__getattr__ = lazy_exports(__name__, _LAZY, extra="redis")
__dir__ = lazy_dir(globals(), _LAZY)
