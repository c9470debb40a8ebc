"""The SQLite statements of prune (run leases) and prune_processed (processed marks), as
templates rendered with the state and execution statements (no I/O).

Each reads at most ``:limit`` rows through an index, so a call's work is bounded whatever the
size of the table.
"""

from __future__ import annotations

__all__ = ["EXECUTION_RETENTION", "STATE_RETENTION"]

STATE_RETENTION: dict[str, str] = {
    # Leases that are not live: released (expires_at NULL) or lapsed (before :now), through
    # the (expires_at) index; at most :limit of each kind, then :limit in all.
    "prunable_leases": """
SELECT tenant, run_id, epoch FROM (
    SELECT tenant, run_id, epoch FROM (
        SELECT tenant, run_id, epoch FROM {run_leases} WHERE expires_at IS NULL LIMIT :limit)
    UNION ALL
    SELECT tenant, run_id, epoch FROM (
        SELECT tenant, run_id, epoch FROM {run_leases} WHERE expires_at < :now
        ORDER BY expires_at LIMIT :limit))
LIMIT :limit""",
    # The tenant keeps the highest epoch pruned, so a pruned run's next lease is above it.
    "raise_lease_floor": """
INSERT INTO {lease_floors} (tenant, epoch) VALUES (:tenant, :epoch)
ON CONFLICT (tenant) DO UPDATE SET epoch = MAX(epoch, excluded.epoch)""",
    "delete_lease": """
DELETE FROM {run_leases}
WHERE tenant = :tenant AND run_id = :run_id AND (expires_at IS NULL OR expires_at < :now)
RETURNING 1""",
    "lease_floor": """
SELECT epoch FROM {lease_floors} WHERE tenant = :tenant""",
}

EXECUTION_RETENTION: dict[str, str] = {
    # The oldest marks recorded at or before :cutoff, through the (processed_at, ...) index.
    "prune_processed": """
DELETE FROM {processed} WHERE rowid IN (
    SELECT rowid FROM {processed} WHERE processed_at <= :cutoff
    ORDER BY processed_at, execution_id, event_id LIMIT :limit)
RETURNING 1""",
}
