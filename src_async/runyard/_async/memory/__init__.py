"""The in-process memory backend: the embedded default and the reference implementation."""

from runyard._async.memory.executions import AsyncMemoryExecutionStore
from runyard._async.memory.queue import AsyncMemoryWorkQueue
from runyard._async.memory.state import AsyncMemoryStateStore

__all__ = ["AsyncMemoryExecutionStore", "AsyncMemoryStateStore", "AsyncMemoryWorkQueue"]
