"""The Redis backend, both twins: ``pip install runyard[redis]``. See docs/redis.md."""

from runyard._async.redis import AsyncRedisStateStore, AsyncRedisStore, AsyncRedisWorkQueue
from runyard._redis_settings import RedisStoreSettings
from runyard._sync.redis import RedisStateStore, RedisStore, RedisWorkQueue

__all__ = [
    "AsyncRedisStateStore",
    "AsyncRedisStore",
    "AsyncRedisWorkQueue",
    "RedisStateStore",
    "RedisStore",
    "RedisStoreSettings",
    "RedisWorkQueue",
]

for _cls in (
    AsyncRedisStateStore,
    AsyncRedisStore,
    AsyncRedisWorkQueue,
    RedisStateStore,
    RedisStore,
    RedisWorkQueue,
):
    _cls.__module__ = "runyard.redis"
RedisStoreSettings.__module__ = "runyard.redis"
