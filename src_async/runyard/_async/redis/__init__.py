"""The Redis backend (redis-py, Redis Cluster included)."""

from runyard._async.redis.executions import AsyncRedisStore
from runyard._async.redis.queue import AsyncRedisWorkQueue
from runyard._async.redis.state import AsyncRedisStateStore
from runyard._async.redis.updates import AsyncRedisUpdates

__all__ = ["AsyncRedisStateStore", "AsyncRedisStore", "AsyncRedisUpdates", "AsyncRedisWorkQueue"]
