"""The server's side of claim+complete (``make bench-postgres``, part 5): the SQL through pgbench.

pgbench, PostgreSQL's own benchmark client, is written in C: what it measures is what the
server spends (parsing, planning, locks, index and WAL writes, commits), with next to nothing
of a client's. At concurrency 16, statements prepared, for ``seconds`` each, in one run:

1. the raw single-row UPDATE+COMMIT of parts 1 to 4 (the baseline);
2. the lean SKIP LOCKED claim and DELETE of part 4 (the floor of any two-statement queue);
3. a bare SKIP LOCKED claim and DELETE on the queue's own table: its indexes and row width,
   none of the rotation, the counts or the reclaim;
4. the queue's own statements, ``claim_retire`` (the claim's form an adapter sends between its
   looks for lapsed leases) and ``complete``, every item in one tenant, then spread over 16.

A case's jobs/s counts the items its run deleted (a claim that found no item, or its tenant's
heads locked, completes nothing); the ratio is to the baseline. A case that ran out of items
says so (its figure is then a floor). Skipped, saying so, without pgbench.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict
from runyard.postgres import StateTables
from runyard.postgres.statements import statements
from runyard.postgres.statements.queue_rotation import LEASE

__all__ = ["SERVER_HEADER", "pgbench_path", "server_side"]

CLIENTS = 16
SERVER_HEADER = ["SQL through pgbench", "clients", "jobs/s", "raw UPDATE+COMMIT/s", "ratio"]
RAW = "raw UPDATE+COMMIT"
LEAN = "lean SKIP LOCKED claim+delete"
BARE = "queue table: bare SKIP LOCKED claim+delete"
QUEUE = "queue claim+complete statements"


def pgbench_path() -> str | None:
    """pgbench on the PATH, else the newest under /usr/lib/postgresql/*/bin (Debian's layout)."""
    found = shutil.which("pgbench")
    if found:
        return found
    candidates = glob.glob("/usr/lib/postgresql/*/bin/pgbench")
    return max(candidates, key=lambda p: int(Path(p).parts[-3])) if candidates else None


def _variables(text: str, names: dict[int, str]) -> str:
    """The statement with its ``$n`` parameters as pgbench variables, on one line."""
    return re.sub(r"\$(\d+)", lambda m: names[int(m.group(1))], text).replace("\n", " ")


def _scripts(tables: StateTables, now: float) -> dict[str, str]:
    """Each case's pgbench script (the baseline's and the lean table's as in parts 1 to 4).

    A claim's row goes to variables with ``\\aset`` (a claim that returns no row leaves them as
    they were: the previous item, gone, so its complete deletes nothing), and every variable a
    complete reads starts as 0 (``PRESET``: no tenant, item, token or id is 0); a NULL column
    (a claim that found its tenant's heads locked) is passed as NULL, which matches no row.
    The queue's claim is the form an adapter sends after its first claim, ``claim_retire``,
    given the tenant it served last (the reclaim's form, sent every
    RECLAIM_EVERY_SECONDS, is not measured)."""
    sql = statements(tables)
    work, lean, raw = (
        tables.qualified(tables.work),
        tables.qualified("bench_lean"),
        tables.qualified("bench_raw"),
    )
    times = f"\\set now {now}\n\\set exp {now + 3600}\n"
    lease = LEASE.format(token_seq=tables.placeholders()["token_seq"])
    claim = _variables(
        sql.claim_retire,
        {
            1: ":now",
            2: "'bench'",
            3: ":exp",
            4: "'{}'",
            5: "ARRAY[NULLIF(:tenant, '')]",
            6: "true",  # parking, as an unbound claim sends it
        },
    )
    held = {1: "NULLIF(:tenant, '')", 2: "NULLIF(:item_id, '')", 3: "NULLIF(:token, '')"}
    complete = _variables(sql.complete, {**held, 4: ":now", 5: "3600"})
    bare_claim = f"""WITH head AS (
    SELECT w.ctid FROM {work} w
    WHERE w.tenant = 't0' AND w.state = 'ready' AND w.available_at <= $1::float8
    ORDER BY w.priority DESC, w.available_at, w.seq LIMIT 1 FOR UPDATE OF w SKIP LOCKED
), claimed AS (
    UPDATE {work} AS w {lease}
    WHERE w.ctid = (SELECT h.ctid FROM head h) AND w.state = 'ready'
    RETURNING w.tenant, w.item_id, w.token
) SELECT c.tenant, c.item_id, c.token FROM claimed c"""
    bare_claim = _variables(bare_claim, {1: ":now", 2: "'bench'", 3: ":exp"})
    bare_delete = _variables(
        f"DELETE FROM {work} w WHERE w.tenant = $1::text AND w.item_id = $2::text "
        "AND w.token = $3::bigint",
        held,
    )
    return {
        RAW: f"\\set id random(0, 63)\nUPDATE {raw} SET n = n + 1 WHERE id = :id;\n",
        LEAN: (
            f"UPDATE {lean} SET state = 'leased', token = id WHERE id = (SELECT id FROM {lean} "
            "WHERE state = 'ready' ORDER BY priority DESC, id LIMIT 1 FOR UPDATE SKIP LOCKED) "
            "RETURNING id AS lean_id, token \\aset\n"
            f"DELETE FROM {lean} WHERE id = NULLIF(:lean_id, '')::bigint "
            "AND token = NULLIF(:token, '')::bigint;\n"
        ),
        BARE: times + bare_claim + " \\aset\n" + bare_delete + ";\n",
        QUEUE: times + claim + " \\aset\n" + complete + ";\n",
    }


# Every variable a complete reads, 0 until a claim sets it (pgbench -D; it takes no empty value).
PRESET = ("tenant", "item_id", "token", "lean_id")


def _pgbench(pgbench: str, dsn: str, script: Path, seconds: float) -> tuple[float, int]:
    """Run ``script`` from CLIENTS clients for ``seconds``: its transactions/s and count."""
    info = conninfo_to_dict(dsn)
    env = dict(os.environ)
    for key, var in (
        ("host", "PGHOST"),
        ("port", "PGPORT"),
        ("user", "PGUSER"),
        ("dbname", "PGDATABASE"),
        ("password", "PGPASSWORD"),
        ("options", "PGOPTIONS"),
    ):
        if info.get(key) is not None:
            env[var] = str(info[key])
    command = [pgbench, "-n", "-M", "prepared", "-c", str(CLIENTS), "-j", "2"]
    command += [f"-D{name}=0" for name in PRESET]
    command += ["-T", str(max(1, round(seconds))), "-f", str(script)]
    out = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    tps = re.search(r"tps = ([\d.]+) \(without", out.stdout)
    done = re.search(r"actually processed: (\d+)", out.stdout)
    if out.returncode != 0 or tps is None or done is None or "aborted" in out.stdout:
        tail = out.stdout[-800:] + out.stderr[-800:]
        raise RuntimeError(f"pgbench failed ({script.name}): {tail}")
    return float(tps.group(1)), int(done.group(1))


def server_side(
    tables: StateTables,
    dsn: str,
    seconds: float,
    load: Callable[[int], None],
    lean_fill: Callable[[], object],
) -> list[list[str]]:
    """One row per case (see the module): name, clients, jobs/s, the baseline's, the ratio.
    ``load(tenants)`` queues the items of a queue case (100,000 of them, as parts 1 and 3 do);
    ``lean_fill()`` fills the lean table. [] when pgbench is missing (printed)."""
    pgbench = pgbench_path()
    if pgbench is None:
        print("(no pgbench: the server-side figures are skipped)")
        return []
    work, lean = tables.qualified(tables.work), tables.qualified("bench_lean")

    def count(table: str) -> int:
        with psycopg.connect(dsn, autocommit=True) as conn:
            row: Any = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
            return int(row[0])

    rows: list[list[str]] = []
    with tempfile.TemporaryDirectory(prefix="runyard-pgbench-") as folder:
        scripts = _scripts(tables, time.time())
        paths = {}
        for i, (name, text) in enumerate(scripts.items()):
            paths[name] = Path(folder) / f"case{i}.sql"
            paths[name].write_text(text, encoding="utf-8")
        baseline, _ = _pgbench(pgbench, dsn, paths[RAW], seconds)
        rows.append([RAW, str(CLIENTS), f"{baseline:,.0f}", f"{baseline:,.0f}", "1.00"])
        cases: list[tuple[str, str, Callable[[], object]]] = [
            (LEAN, lean, lean_fill),
            (BARE, work, lambda: load(1)),
            (f"{QUEUE}, 1 tenant", work, lambda: load(1)),
            (f"{QUEUE}, 16 tenants", work, lambda: load(16)),
        ]
        for label, table, fill in cases:
            fill()
            before = count(table)
            tps, done = _pgbench(pgbench, dsn, paths[label.split(",")[0]], seconds)
            left = count(table)
            if left == 0:
                print(f"({label}: ran out of items; its figure is a floor)")
            jobs = (before - left) * tps / done
            rows.append(
                [label, str(CLIENTS), f"{jobs:,.0f}", f"{baseline:,.0f}", f"{jobs / baseline:.2f}"]
            )
    return rows
