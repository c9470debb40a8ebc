"""AsyncMemoryUpdates: in-process live updates for the memory state store (the shared
in-process hub, runyard._async.local_updates, under the memory backend's names)."""

from runyard._async.local_updates import AsyncLocalSubscription as AsyncMemorySubscription
from runyard._async.local_updates import AsyncLocalUpdates as AsyncMemoryUpdates

__all__ = ["AsyncMemorySubscription", "AsyncMemoryUpdates"]
