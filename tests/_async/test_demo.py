"""The demo's workload: quiet tenants finish long before the noisy one."""

from __future__ import annotations

from pathlib import Path

import pytest
from runyard._async.cli.demo import run_demo
from runyard.cli.demo import DemoPlan
from runyard.sqlite import AsyncSqliteWorkQueue


@pytest.mark.asyncio
async def test_quiet_tenants_are_served_before_the_noisy_backlog_drains() -> None:
    plan = DemoPlan(noisy_items=60, quiet_tenants=3, quiet_items=4, workers=3, work_seconds=0)
    seen: list[str] = []
    result = await run_demo(plan, "test", seen.append)
    assert result.completed == plan.total == len(result.served) == len(seen)
    reports = {r.tenant: r for r in result.reports()}
    assert not result.quiet_tenants_starved()
    # Rotation: with 4 tenants every quiet item is served within the first 4 * 4 + workers claims.
    assert max(reports[f"quiet-{n}"].last for n in (1, 2, 3)) <= 4 * 4 + plan.workers
    assert reports["noisy"].completed == 60
    assert reports["quiet-1"].tokens == sum(100 + n % 7 for n in range(4))


@pytest.mark.asyncio
async def test_the_demo_serves_its_own_tenants_behind_many_others(tmp_path: Path) -> None:
    # Its claims gave up after 64 hand-backs: behind 200 other tenants, workers stopped as if
    # idle with the demo's items still queued (16 of 30 served).
    path = tmp_path / "busy.db"
    queue = await AsyncSqliteWorkQueue.open(path, create_schema=True)
    try:
        for n in range(200):
            await queue.enqueue(f"user-{n}", {"order": n}, item_id=f"order-{n}")
    finally:
        await queue.aclose()
    plan = DemoPlan(noisy_items=20, quiet_tenants=2, quiet_items=3, workers=2, work_seconds=0)
    result = await run_demo(plan, "test", url=f"sqlite:///{path}")
    assert result.completed == plan.total and not result.quiet_tenants_starved()
    queue = await AsyncSqliteWorkQueue.open(path)
    try:
        for n in range(200):
            item = await queue.get_item(f"user-{n}", f"order-{n}")
            assert item is not None and (item.state, item.attempts) == ("ready", 0)
    finally:
        await queue.aclose()
