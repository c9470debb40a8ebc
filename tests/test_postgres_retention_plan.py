"""prune and prune_processed walk their indexes on large tables, analyzed or never analyzed
(generic plans): a call touches a bounded number of buffers, whatever the table's size."""

from __future__ import annotations

import re

import pytest
from runyard.postgres import StateTables
from runyard.postgres.statements import statements
from runyard.postgres.statements.executions import execution_statements

from tests.support.postgres_plugin import admin_connection

ROWS = 100_000
LIMIT = 10
# Buffers one call may touch (index pages and the heap pages of the rows it deletes); a scan of
# either table would touch thousands.
MAX_BUFFERS = 200


def _buffers(plan: str) -> int:
    top = plan.splitlines()[0:3]
    found = [int(n) for line in top for n in re.findall(r"(?:hit|read|dirtied)=(\d+)", line)]
    return sum(found)


@pytest.mark.parametrize("analyzed", [False, True], ids=["never-analyzed", "analyzed"])
def test_prune_statements_touch_a_bounded_number_of_buffers(
    pg_tables: StateTables, analyzed: bool
) -> None:
    t = pg_tables
    leases, processed = t.qualified(t.run_leases), t.qualified(t.processed)
    with admin_connection() as conn:
        # Live leases (far in the future) and young marks, then a few prunable of each.
        conn.execute(
            f"INSERT INTO {leases} SELECT 't' || (g % 100), 'r' || g, 'w', 1, 1e12 "
            f"FROM generate_series(1, {ROWS}) g"
        )
        conn.execute(
            f"INSERT INTO {leases} SELECT 'old', 'r' || g, NULL, 1, NULL "
            f"FROM generate_series(1, {LIMIT * 5}) g"
        )
        conn.execute(
            f"INSERT INTO {processed} SELECT 'e' || (g % 1000), 'ev' || g, 1e9 + g "
            f"FROM generate_series(1, {ROWS}) g"
        )
        if analyzed:
            conn.execute(f"ANALYZE {leases}")
            conn.execute(f"ANALYZE {processed}")
        conn.execute("SET plan_cache_mode = force_generic_plan")
        cases = {
            "prune_leases": (statements(t).prune_leases, "1e11"),
            "prune_processed": (execution_statements(t).prune_processed, "1e9 + 50"),
        }
        touched = {}
        for n, (name, (statement, first)) in enumerate(cases.items()):
            conn.execute(f"PREPARE q{n} (float8, bigint) AS {statement}")
            with conn.transaction(force_rollback=True):
                rows = conn.execute(
                    f"EXPLAIN (ANALYZE, BUFFERS) EXECUTE q{n} ({first}, {LIMIT})"
                ).fetchall()
            plan = "\n".join(str(r[0]) for r in rows)
            assert "Seq Scan" not in plan, plan
            touched[name] = _buffers(plan)
    assert all(0 < b <= MAX_BUFFERS for b in touched.values()), touched
