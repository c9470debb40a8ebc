"""The memory queue's maintenance: dead letters (list, requeue, purge), cancel, prune, reads."""

from __future__ import annotations

from runyard.errors import ItemLeasedError, WorkItemNotFoundError
from runyard.keys import validate_identifier
from runyard.memory._copies import detached
from runyard.memory.queue_base import MemoryQueueBase
from runyard.models import DeadLetter, QueueStats, WorkItem
from runyard.validation import check_limit, check_older_than

__all__ = ["MemoryQueueAdmin"]


class MemoryQueueAdmin(MemoryQueueBase):
    """What operators call, beside the claim/settle loop of workers."""

    @detached
    def dead_letters(self, tenant: str, *, limit: int) -> list[DeadLetter]:
        validate_identifier(tenant, "tenant")
        check_limit(limit)
        letters = sorted(
            (d for (t, _), d in self._dead.items() if t == tenant),
            key=lambda d: (d.dead_at, d.item.item_id),
        )
        return letters[:limit]

    @detached
    def requeue(self, tenant: str, item_id: str) -> WorkItem:
        validate_identifier(tenant, "tenant")
        validate_identifier(item_id, "item_id")
        if self._dead.pop((tenant, item_id), None) is None:
            raise WorkItemNotFoundError(f"no dead-lettered item {item_id!r} in tenant {tenant!r}")
        item = self._items[(tenant, item_id)]
        now = self.clock.now()
        ready = item.model_copy(update={"state": "ready", "attempts": 0, "available_at": now})
        self._items[(tenant, item_id)] = ready
        self._make_ready(ready, now)
        return ready

    def cancel(self, tenant: str, item_id: str) -> bool:
        """Delete a ready, delayed or dead item; False when there is none. Raises
        ItemLeasedError (changing nothing) for a leased one."""
        validate_identifier(tenant, "tenant")
        validate_identifier(item_id, "item_id")
        item = self._items.get((tenant, item_id))
        if item is None:
            return False
        if item.state == "leased":
            raise ItemLeasedError(item_id, item.worker)
        self._forget(item)
        return True

    def purge_dead(self, tenant: str, *, older_than: float, limit: int) -> int:
        """Delete up to ``limit`` of the tenant's dead letters dead for ``older_than`` seconds
        or more, oldest first; return how many."""
        validate_identifier(tenant, "tenant")
        older_than = check_older_than(older_than)
        check_limit(limit)
        cutoff = self.clock.now() - older_than
        letters = sorted(
            (d for (t, _), d in self._dead.items() if t == tenant and d.dead_at <= cutoff),
            key=lambda d: (d.dead_at, d.item.item_id),
        )[:limit]
        for letter in letters:
            self._forget(letter.item)
        return len(letters)

    def prune(self, *, limit: int) -> int:
        """Forget up to ``limit`` tenants (least recently served first) that hold no item in
        any state; return how many. A later enqueue makes such a tenant new again."""
        check_limit(limit)
        occupied = {tenant for tenant, _ in self._items}
        idle = sorted(
            (state.turn, name) for name, state in self._tenants.items() if name not in occupied
        )[:limit]
        for _, name in idle:
            del self._tenants[name]
        return len(idle)

    @detached
    def get_item(self, tenant: str, item_id: str) -> WorkItem | None:
        validate_identifier(tenant, "tenant")
        validate_identifier(item_id, "item_id")
        return self._items.get((tenant, item_id))

    @detached
    def stats(self) -> QueueStats:
        now = self.clock.now()
        ready = delayed = leased = dead = 0
        tenants = set()
        for item in self._items.values():
            if item.state == "leased":
                leased += 1
            elif item.state == "dead":
                dead += 1
            elif item.available_at > now:
                delayed += 1
            else:
                ready += 1
                tenants.add(item.tenant)
        return QueueStats(
            ready=ready, delayed=delayed, leased=leased, dead=dead, tenants=len(tenants)
        )
