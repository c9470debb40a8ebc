"""The baselines of the execution benchmark (benchmarks/bench_executions.py) and the commits
they and the store share: the full commit done the WATCH/MULTI/EXEC way (``INCR`` for the outbox
seq and the trace index, ``WATCH`` + ``HGET`` of the version, then ``MULTI``...``EXEC`` with every
write) and the raw psycopg single-row UPDATE+COMMIT, in each twin, and the PostgreSQL schemas the
benchmark works in."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from typing import Any

import psycopg
import redis
import redis.asyncio as aioredis
from runyard._json import dump_json
from runyard.executions import Event, Execution, TimerOp, TraceStep
from runyard.executions.planning import CommitPlan, plan_commit
from runyard.postgres import StateTables, schema_sql
from runyard.redis.executions import step_json, timer_member

__all__ = [
    "CONTEXT",
    "PG_DSN",
    "PG_RAW",
    "async_raw_postgres",
    "async_watch_multi_exec",
    "full_commit",
    "pg_schema",
    "rate",
    "sync_raw_postgres",
    "sync_watch_multi_exec",
]

T0 = 1_700_000_000.0
CONTEXT = {"cart": ["sku-1", "sku-2"], "total": 4200, "customer": {"id": "c-7", "tier": "gold"}}


def rate(n: int, elapsed: float) -> float:
    """Operations per second."""
    return n / elapsed


def full_commit(i: int) -> dict[str, Any]:
    """The keyword arguments of the ``full`` path's i-th commit."""
    return {
        "emits": [("billing", Event(id=f"out-{i}", name="charge", data={"amount": i}))],
        "processed_event_id": f"in-{i}",
        "timers": [TimerOp.schedule("waiting.timeout", T0 + i)],
        "trace": TraceStep(event_id=f"in-{i}", event_name="submit"),
    }


def _wme_values(plan: CommitPlan) -> tuple[str, str, float, str, str]:
    """What the WATCH/MULTI/EXEC way writes, serialised as the store serialises it."""
    target_id, event = plan.emits[0]
    emit = dump_json({"target_id": target_id, "event": event.model_dump()})
    op = plan.timers[0]
    assert op.fire_at is not None and plan.trace is not None
    member = timer_member(plan.execution.id, op.path)
    return emit, member, op.fire_at, step_json(plan.trace), dump_json(plan.execution.context)


async def async_watch_multi_exec(client: aioredis.Redis, n: int) -> float:
    """The full commit without a script: INCRs for seqs, then WATCH/MULTI/EXEC."""
    key, ns = "wme:exe", "wme"
    exe = Execution(id="e1", definition_id="checkout", context=CONTEXT)
    await client.hset(key, mapping={"version": 0})
    start = time.perf_counter()
    for i in range(n):
        # The same checks and serialisation as the store, so only the writes differ.
        exe.context["step"] = i
        plan = plan_commit(exe, **full_commit(i))
        now = time.time()
        emit, member, fire_at, step, context = _wme_values(plan)
        seq = await client.incr(f"{ns}:outbox-seq")
        index = await client.incr(f"{ns}:trace-index")
        async with client.pipeline(transaction=True) as pipe:
            await pipe.watch(key)
            version = int(await pipe.hget(key, "version") or 0)
            pipe.multi()  # type: ignore[no-untyped-call]
            pipe.hset(
                key,
                mapping={
                    "version": version + 1,
                    "updated_at": now,
                    "status": plan.execution.status,
                    "context": context,
                },
            )
            pipe.zadd(f"{ns}:outbox", {f"{seq} {emit}": seq})
            pipe.sadd(f"{ns}:processed", f"in-{i}")
            pipe.zadd(f"{ns}:timers", {member: fire_at})
            pipe.rpush(f"{ns}:trace", f"{index} {now} {step}")
            pipe.ltrim(f"{ns}:trace", -200, -1)
            await pipe.execute()
    return rate(n, time.perf_counter() - start)


def sync_watch_multi_exec(client: redis.Redis, n: int) -> float:
    """The full commit without a script: INCRs for seqs, then WATCH/MULTI/EXEC."""
    key, ns = "wme:exe", "wme"
    exe = Execution(id="e1", definition_id="checkout", context=CONTEXT)
    client.hset(key, mapping={"version": 0})
    start = time.perf_counter()
    for i in range(n):
        # The same checks and serialisation as the store, so only the writes differ.
        exe.context["step"] = i
        plan = plan_commit(exe, **full_commit(i))
        now = time.time()
        emit, member, fire_at, step, context = _wme_values(plan)
        seq = client.incr(f"{ns}:outbox-seq")
        index = client.incr(f"{ns}:trace-index")
        with client.pipeline(transaction=True) as pipe:
            pipe.watch(key)  # type: ignore[no-untyped-call]
            version = int(pipe.hget(key, "version") or 0)
            pipe.multi()
            pipe.hset(
                key,
                mapping={
                    "version": version + 1,
                    "updated_at": now,
                    "status": plan.execution.status,
                    "context": context,
                },
            )
            pipe.zadd(f"{ns}:outbox", {f"{seq} {emit}": seq})
            pipe.sadd(f"{ns}:processed", f"in-{i}")
            pipe.zadd(f"{ns}:timers", {member: fire_at})
            pipe.rpush(f"{ns}:trace", f"{index} {now} {step}")
            pipe.ltrim(f"{ns}:trace", -200, -1)
            pipe.execute()
    return rate(n, time.perf_counter() - start)


# -- PostgreSQL: each store in a schema of its own (tables from schema_sql), dropped on close --
PG_DSN = os.environ.get(
    "RUNYARD_BENCH_PG_DSN",
    "host=127.0.0.1 port=5432 user=postgres dbname=test options='-c statement_timeout=30s'",
)
PG_RAW = "raw psycopg UPDATE+COMMIT"


def pg_schema() -> tuple[StateTables, Callable[[], None]]:
    """A fresh schema with runyard's tables and the raw baseline's table; and its drop."""
    name = f"bench_exec_{uuid.uuid4().hex[:8]}"
    tables = StateTables(schema=name)
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{name}"')
        conn.execute(schema_sql(tables))
        conn.execute(f'CREATE TABLE "{name}".raw (id int PRIMARY KEY, n bigint NOT NULL)')
        conn.execute(f'INSERT INTO "{name}".raw VALUES (1, 0)')

    def drop() -> None:
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{name}" CASCADE')

    return tables, drop


async def async_raw_postgres(n: int) -> float:
    """One prepared single-row UPDATE in autocommit: one round trip and one commit, like a
    runyard commit."""
    tables, drop = pg_schema()
    sql = f'UPDATE "{tables.schema}".raw SET n = n + 1 WHERE id = 1 RETURNING n'
    async with await psycopg.AsyncConnection.connect(PG_DSN, autocommit=True) as conn:
        for _ in range(min(n, 200)):
            await conn.execute(sql, prepare=True)
        start = time.perf_counter()
        for _ in range(n):
            await conn.execute(sql, prepare=True)
        per_second = rate(n, time.perf_counter() - start)
    drop()
    return per_second


def sync_raw_postgres(n: int) -> float:
    """The sync twin of ``async_raw_postgres``."""
    tables, drop = pg_schema()
    sql = f'UPDATE "{tables.schema}".raw SET n = n + 1 WHERE id = 1 RETURNING n'
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        for _ in range(min(n, 200)):
            conn.execute(sql, prepare=True)
        start = time.perf_counter()
        for _ in range(n):
            conn.execute(sql, prepare=True)
        per_second = rate(n, time.perf_counter() - start)
    drop()
    return per_second
