"""The demo's workload: quiet tenants finish long before the noisy one."""

from __future__ import annotations

import pytest
from runyard._async.cli.demo import run_demo
from runyard.cli.demo import DemoPlan


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
