"""PostgreSQL ``prune`` walks the rotation in turn order, PRUNE_WINDOW rows a call: each pass
is bounded by the highest turn at its start, so claims that keep moving tenants past the
cursor cannot keep a pass from ending (and the idle tenants it passed from being pruned); a
call that reaches its limit resumes after the last tenant it retired, so the least recently
served idle tenants go first. The window is made small here, to walk several calls."""

from __future__ import annotations

import pytest
import runyard._sync.postgres.queue as queue_module
from runyard.postgres import StateTables

from tests._sync.postgres_support import open_queue
from tests.support.postgres_plugin import admin_connection


def _rotation(tables: StateTables) -> list[str]:
    with admin_connection() as conn:
        rows = conn.execute(
            f"SELECT tenant FROM {tables.qualified(tables.turns)} ORDER BY turn, tenant"
        ).fetchall()
    return [str(row[0]) for row in rows]


def test_claims_moving_tenants_past_the_cursor_cannot_keep_idle_ones_from_being_pruned(
    pg_tables: StateTables, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(queue_module, "PRUNE_WINDOW", 3)
    queue = open_queue(pg_tables)
    try:
        idle = {f"0idle{i}": queue.enqueue(f"0idle{i}", {}) for i in range(3)}
        for a in range(6):
            for _ in range(20):
                queue.enqueue(f"active{a}", {})
        assert queue.prune(limit=100) == 0  # the cursor is now past the three
        for tenant, item in idle.items():
            queue.cancel(tenant, item.item_id)  # idle now, behind the cursor
        for _ in range(8):  # each round serves every active tenant: past the cursor again
            for _ in range(6):
                lease = queue.claim("w")
                assert lease is not None
                queue.complete(lease)
            queue.prune(limit=100)
        assert _rotation(pg_tables) == [f"active{a}" for a in range(6)]
    finally:
        queue.close()


def test_a_prune_that_reaches_its_limit_resumes_after_the_last_tenant_it_retired(
    pg_tables: StateTables, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(queue_module, "PRUNE_WINDOW", 3)
    queue = open_queue(pg_tables)
    try:
        # Each tenant two items, one served (a first: the least recently served), the other
        # cancelled: six idle tenants in the rotation, in turn order a to f (a claim would
        # retire a tenant it drained; a cancelled item leaves its tenant's row to prune).
        second = {}
        for tenant in "abcdef":
            queue.enqueue(tenant, {})
            second[tenant] = queue.enqueue(tenant, {})
        for tenant in "abcdef":
            lease = queue.claim("w")
            assert lease is not None and lease.tenant == tenant
            queue.complete(lease)
        for tenant, item in second.items():
            queue.cancel(tenant, item.item_id)
        assert _rotation(pg_tables) == list("abcdef")
        left = []
        for _ in range(6):
            assert queue.prune(limit=1) == 1
            left.append(_rotation(pg_tables))
        assert left == [list("bcdef"), list("cdef"), list("def"), list("ef"), ["f"], []]
    finally:
        queue.close()
