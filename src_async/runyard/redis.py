"""The Redis backend, both twins: ``pip install runyard[redis]``. See docs/redis.md."""

from runyard._async.redis import AsyncRedisStateStore, AsyncRedisWorkQueue
from runyard._redis_settings import RedisStoreSettings
from runyard._sync.redis import RedisStateStore, RedisWorkQueue

__all__ = [
    "AsyncRedisStateStore",
    "AsyncRedisWorkQueue",
    "RedisStateStore",
    "RedisStoreSettings",
    "RedisWorkQueue",
]

for _cls in (AsyncRedisStateStore, AsyncRedisWorkQueue, RedisStateStore, RedisWorkQueue):
    _cls.__module__ = "runyard.redis"
RedisStoreSettings.__module__ = "runyard.redis"
