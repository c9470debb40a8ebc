"""The demo's plan and its report, shared by both flavours (no I/O)."""

from __future__ import annotations

import re
import statistics
from collections.abc import Collection
from dataclasses import dataclass, field

from runyard.cli.crash import CrashReport
from runyard.models import Lease

__all__ = ["DemoPlan", "DemoResult", "TenantReport", "sort_claimed"]

# The tenants demos make: "<name>~<8 hex digits>", one id per run of the demo.
DEMO_TENANT = re.compile(r"(noisy|quiet-[0-9]+|crash)~[0-9a-f]{8}")


def sort_claimed(
    leases: Collection[Lease], limit: int, passed: set[str]
) -> tuple[list[Lease], list[Lease], bool]:
    """Of a demo worker's claim (``limit`` asked), the demo's leases, the others (to hand
    back), and whether the claim is over: it took a demo item, found nothing more due, or
    met a tenant it handed back already (``passed``, updated here), so the rotation came round
    without a demo tenant due."""
    own = [lease for lease in leases if DEMO_TENANT.fullmatch(lease.tenant)]
    others = [lease for lease in leases if not DEMO_TENANT.fullmatch(lease.tenant)]
    if own or len(leases) < limit:
        return own, others, True
    tenants = {lease.tenant for lease in others}
    came_round = bool(tenants & passed) or len(tenants) < len(others)
    passed |= tenants
    return own, others, came_round


@dataclass(frozen=True)
class DemoPlan:
    """How much work each tenant enqueues, and how many workers serve it."""

    noisy_items: int = 300
    quiet_tenants: int = 4
    quiet_items: int = 10
    workers: int = 4
    work_seconds: float = 0.002

    def __post_init__(self) -> None:
        if min(self.noisy_items, self.quiet_tenants, self.quiet_items, self.workers) < 1:
            raise ValueError("every count in the demo plan must be at least 1")
        if self.work_seconds < 0:
            raise ValueError("work_seconds must not be negative")

    @property
    def tenants(self) -> list[tuple[str, int]]:
        """(tenant, items) in enqueue order: the noisy tenant first, the worst case for FIFO."""
        quiet = [(f"quiet-{n}", self.quiet_items) for n in range(1, self.quiet_tenants + 1)]
        return [("noisy", self.noisy_items), *quiet]

    @property
    def total(self) -> int:
        """Every item of every tenant."""
        return sum(items for _, items in self.tenants)


@dataclass(frozen=True)
class TenantReport:
    """When a tenant's items were served, as positions in the global order of service (1-based)."""

    tenant: str
    items: int
    completed: int
    first: int
    last: int
    median: float
    fifo_first: int
    fifo_last: int
    tokens: int


@dataclass
class DemoResult:
    """What the workers did, in the order they served items."""

    plan: DemoPlan
    flavour: str
    served: list[str] = field(default_factory=list)
    tokens: dict[str, int] = field(default_factory=dict)
    completed: int = 0
    failed: int = 0
    crash: CrashReport | None = None

    def reports(self) -> list[TenantReport]:
        """One report per tenant, with where plain FIFO would have served it for comparison."""
        out = []
        fifo_start = 1
        for tenant, items in self.plan.tenants:
            positions = [i + 1 for i, t in enumerate(self.served) if t == tenant]
            out.append(
                TenantReport(
                    tenant=tenant,
                    items=items,
                    completed=len(positions),
                    first=positions[0] if positions else 0,
                    last=positions[-1] if positions else 0,
                    median=statistics.median(positions) if positions else 0.0,
                    fifo_first=fifo_start,
                    fifo_last=fifo_start + items - 1,
                    tokens=self.tokens.get(tenant, 0),
                )
            )
            fifo_start += items
        return out

    def rotation_bound(self) -> int:
        """The last position any quiet item may have when tenants are served in rotation: one
        item per tenant with work per round, plus the items the workers held meanwhile."""
        return (self.plan.quiet_tenants + 1) * self.plan.quiet_items + self.plan.workers

    def quiet_tenants_starved(self) -> bool:
        """True if any quiet tenant's last item was served later than rotation allows."""
        bound = min(self.rotation_bound(), self.plan.total)
        return any(
            r.last > bound or r.completed < r.items for r in self.reports() if r.tenant != "noisy"
        )
