"""What both Redis twins share and is not I/O: reply decoding, failure classification,
preflight decisions and retry delays (the queue's item decoding is in items.py)."""

from __future__ import annotations

import inspect
import random
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal
from urllib.parse import parse_qsl, unquote, urlsplit

from runyard._json import load_json
from runyard.clock import Clock
from runyard.errors import (
    ConfigurationError,
    LeaseLostError,
    RunyardError,
    StateConflictError,
    StatePersistenceError,
)
from runyard.models import RunRecord, SessionRecord
from runyard.redis.flavours import (
    AsyncRedis,
    AsyncRedisCluster,
    AuthenticationError,
    AuthenticationWrongNumberOfArgsError,
    AuthorizationError,
    BusyLoadingError,
    ClusterDownError,
    MaxConnectionsError,
    NoPermissionError,
    NoScriptError,
    OutOfMemoryError,
    ReadOnlyError,
    RedisCluster,
    RedisClusterException,
    RedisConnectionError,
    RedisTimeoutError,
    ResponseError,
    TryAgainError,
)

__all__ = [
    "CONFIG_SETTINGS",
    "Failure",
    "ReplyLost",
    "check_database",
    "classify",
    "client_retries",
    "client_retry_problem",
    "config_unavailable_message",
    "decode_run",
    "decode_session",
    "layout_message",
    "layout_refusal",
    "now_arg",
    "opt_text",
    "pairs",
    "preflight_problems",
    "raise_refusal",
    "refused_by_redis",
    "retry_delay",
    "state_unavailable",
    "text",
    "timestamp",
]

Failure = Literal["noscript", "not_applied", "ambiguous", "pool", "fatal", "configuration"]
CONFIG_SETTINGS = ("maxmemory-policy", "appendonly", "save")
# BUSY: a script (or module command) has run past busy-reply-threshold; the server ran nothing
# else meanwhile, so the refused command was not applied and may be sent again.
_NOT_APPLIED_PREFIXES = (
    "LOADING",
    "MASTERDOWN",
    "CLUSTERDOWN",
    "TRYAGAIN",
    "READONLY",
    "OOM",
    "BUSY ",
)
# What a reply no retry can change says: the URL names a database the server does not have
# (SELECT at connect), or a cluster client met a server not in cluster mode.
_CONFIGURATION_MARKS = ("DB index is out of range", "Cluster mode is not enabled")


class ReplyLost(RunyardError):
    """Internal: a write was sent and its reply was lost; the store reads back or gives up."""


def check_database(dsn: str, cluster: bool) -> None:
    """Refuse a Redis URL whose database is not a number, or, for a cluster, not 0, read as
    redis-py reads it: the ``db`` query parameter, else the path (percent-decoded; a
    ``unix://`` URL's path is its socket). redis-py serves database 0 for a path that is not a
    number, and raises its own error for a cluster's ``db``. The message never shows the
    value: a password holding an unescaped ``/`` ends up in the path."""
    parts = urlsplit(dsn)
    named = [value for name, value in parse_qsl(parts.query) if name == "db"]
    if named:
        database = unquote(named[-1])
    elif parts.scheme in ("unix", ""):
        return
    else:
        database = unquote(parts.path).strip("/")
    if database and not (database.isascii() and database.isdigit()):
        raise ConfigurationError(
            "the Redis URL's database (its path, or its db parameter) is not a number: give "
            "it as /0, /1, ... or ?db=N (or leave it out for 0); a password that holds a / "
            "must be percent-encoded (%2F)"
        )
    if cluster and int(database or 0) != 0:
        raise ConfigurationError(
            f"the Redis URL names database {int(database)}: a Redis Cluster has only database "
            "0; leave the path empty or /0"
        )


def check_cluster_url_options(dsn: str) -> None:
    """``check_connection_options`` for a Redis Cluster URL, before its client is built: the
    query parameters its nodes' connections take (or the cluster client itself). The async
    cluster client refused another as a bare TypeError, the sync one connected first.
    Raises ValueError for a URL redis-py cannot parse (the caller names it malformed)."""
    from redis.asyncio.cluster import RedisCluster as AsyncCluster
    from redis.cluster import RedisCluster
    from redis.connection import Connection, ConnectionPool, parse_url

    parsed: dict[str, Any] = parse_url(dsn)  # type: ignore[no-untyped-call]
    connection_class = parsed.pop("connection_class", Connection)
    own = {  # the cluster clients' own parameters and their nodes' pools' (max_connections)
        name
        for owner in (RedisCluster.__init__, AsyncCluster.__init__, ConnectionPool.__init__)
        for name in inspect.signature(owner).parameters
    }
    check_connection_options(connection_class, {k: v for k, v in parsed.items() if k not in own})


def check_connection_options(connection_class: type, options: Mapping[str, Any]) -> None:
    """Refuse the Redis URL's query parameters that ``connection_class`` (the pool's) takes no
    parameter for: redis-py passes a parameter it does not know to the connection, whose
    ``__init__`` raised a bare TypeError at the first command (``?sslmode=require``, a
    PostgreSQL one). ConfigurationError naming them (names only, never values)."""
    taken: set[str] = set()
    for cls in connection_class.__mro__:
        init = cls.__dict__.get("__init__")
        if init is None:
            continue
        taken.update(
            name
            for name, parameter in inspect.signature(init).parameters.items()
            if parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY)
        )
    unknown = sorted(set(options) - taken)
    if unknown:
        raise ConfigurationError(
            f"the Redis URL has query parameter(s) {', '.join(map(repr, unknown))} that "
            f"redis-py's {connection_class.__name__} does not take: remove them (runyard's own "
            "options are namespace, durable, pool_size, socket_timeout, ...; see the docs)"
        )


def unknown_keyword(exc: TypeError) -> str:
    """The keyword a TypeError says a redis-py class does not take (``'sslmode'``), quoted,
    or "a keyword it does not know" (its message is not shown whole: it is redis-py's)."""
    found = re.search(r"keyword argument '([^']+)'", str(exc))
    return repr(found.group(1)) if found else "a keyword it does not know"


def classify(exc: BaseException) -> Failure:
    """Say what a redis-py error means for a command that was being sent.

    ``not_applied``: the server certainly did not run it (refused connection, loading, failover
    in progress), so it is safe to send again. ``ambiguous``: it may have run (the connection
    died or timed out after sending). ``pool``: no connection was free. ``fatal``: anything
    else (a script error), never retried. ``configuration``: the server refused the credentials,
    the user's permissions, the URL's database number, or a cluster client on a server not in
    cluster mode; sending again cannot help.
    """
    if isinstance(
        exc,
        (
            AuthenticationError,
            AuthorizationError,
            AuthenticationWrongNumberOfArgsError,
            NoPermissionError,
        ),
    ):
        return "configuration"
    if isinstance(exc, NoScriptError):
        return "noscript"
    if isinstance(exc, MaxConnectionsError):
        return "pool"
    if isinstance(exc, BusyLoadingError):
        return "not_applied"
    if isinstance(exc, (RedisConnectionError, RedisTimeoutError)):
        message = str(exc)
        if "No connection available" in message or "Too many connections" in message:
            return "pool"
        # redis-py words every failure to open a socket as "... connecting to <host> ...".
        if "connecting to" in message:
            return "not_applied"
        return "ambiguous"
    # redis-py raises these with the reply's code stripped from the message (OOM, READONLY,
    # TRYAGAIN, CLUSTERDOWN, MASTERDOWN): the prefixes below never see them. Out of memory:
    # maxmemory with noeviction refused the command, or a script at its start, before it ran.
    if isinstance(exc, (ClusterDownError, TryAgainError, ReadOnlyError, OutOfMemoryError)):
        return "not_applied"
    if isinstance(exc, (ResponseError, RedisClusterException)) and any(
        marker in str(exc) for marker in _CONFIGURATION_MARKS
    ):
        return "configuration"
    if isinstance(exc, ResponseError):
        return "not_applied" if str(exc).startswith(_NOT_APPLIED_PREFIXES) else "fatal"
    if isinstance(exc, RedisClusterException):
        return "not_applied"
    if isinstance(exc, OSError):
        return "ambiguous"
    return "fatal"


def client_retries(client: Any) -> int:
    """How many times redis-py itself re-sends a failed command on ``client`` (-1: forever).

    A RedisCluster (either flavour) retries with its own ``retry`` (built from
    ``cluster_error_retry_attempts`` when none is given; its node connections never retry). A
    single-server client retries with its connection pool's ``retry`` (or once, when only
    ``retry_on_error``/``retry_on_timeout`` is set). fakeredis clients carry no retry: 0.
    """
    if isinstance(client, (AsyncRedisCluster, RedisCluster)):
        retry = getattr(client, "retry", None)
        return 0 if retry is None else int(retry.get_retries())
    get_kwargs = getattr(client, "get_connection_kwargs", None)
    kwargs: Mapping[str, Any] = get_kwargs() if callable(get_kwargs) else {}
    retry = kwargs.get("retry")
    if retry is not None:
        return int(retry.get_retries())
    return 1 if kwargs.get("retry_on_error") or kwargs.get("retry_on_timeout") else 0


def client_retry_problem(client: Any) -> str | None:
    """Say why ``client`` cannot back a store (redis-py's own retries are on), or None."""
    retries = client_retries(client)
    if retries == 0:
        return None
    is_asyncio = isinstance(client, (AsyncRedis, AsyncRedisCluster))
    retry_class = "redis.asyncio.retry.Retry" if is_asyncio else "redis.retry.Retry"
    count = "without limit" if retries < 0 else f"up to {retries} times"
    return (
        f"the injected {type(client).__name__} client re-sends failed commands itself "
        f"({count}; redis-py clients retry by default), so a write whose reply was lost would "
        "be applied twice; the store owns retries: build the client with "
        f"retry=Retry(NoBackoff(), 0) (Retry from {retry_class}, NoBackoff from "
        "redis.backoff), or use from_url(), which does"
    )


def retry_delay(attempt: int, base: float, cap: float, rng: random.Random | None = None) -> float:
    """Seconds before retry number ``attempt`` (1-based): doubling, capped, full jitter."""
    ceiling = min(cap, base * 2 ** max(attempt - 1, 0))
    return float(ceiling * (rng or random).random())


def preflight_problems(config: Mapping[str, str], *, durable: bool) -> list[str]:
    """Return one sentence per server setting that makes the store unsafe (empty: accepted)."""
    problems = []
    policy = config.get("maxmemory-policy", "")
    if policy.startswith("allkeys-") or policy == "volatile-ttl":
        problems.append(
            f"maxmemory-policy is {policy!r}: under memory pressure Redis would evict runyard's "
            "runs, leases and work items; set maxmemory-policy to 'noeviction'"
        )
    appendonly, save = config.get("appendonly", ""), config.get("save")
    if durable and appendonly == "no" and save is not None and not save.strip():
        problems.append(
            "appendonly is 'no' and save is '': the server persists nothing, so a restart loses "
            "every run and work item; turn on appendonly (or set save), or pass durable=False "
            "for a server that may lose everything"
        )
    return problems


def config_unavailable_message(reason: str) -> str:
    """The warning for a server whose CONFIG command is disabled (managed Redis)."""
    return (
        f"preflight could not read the server's configuration ({reason}); check by hand that "
        "maxmemory-policy is 'noeviction' and that appendonly or save persists data"
    )


def text(value: Any) -> str:
    """Return a reply element as text (replies are bytes unless decode_responses is on)."""
    if isinstance(value, bytes):
        return value.decode("utf-8")
    return str(value)


def opt_text(value: Any) -> str | None:
    """A reply element as text, or None."""
    return None if value is None else text(value)


def timestamp(moment: float) -> str:
    """A time as the exact text a script stores and compares (repr round-trips a float)."""
    return repr(float(moment))


def now_arg(clock: Clock | None) -> str:
    """``now`` for a state script: the injected clock's reading, or '' for the server's TIME."""
    return "" if clock is None else timestamp(clock.now())


def pairs(flat: Sequence[Any]) -> dict[str, Any]:
    """Turn a flat ``[name, value, name, value...]`` reply into a dict keyed by text."""
    return {text(flat[i]): flat[i + 1] for i in range(0, len(flat) - 1, 2)}


_STORED = object()  # decode_run's default: the blob is the hash's own "blob" field


def decode_run(
    tenant: str, run_id: str, fields: Mapping[Any, Any], blob: Any = _STORED
) -> RunRecord:
    """Build a RunRecord from a run hash; ``blob`` (None included: a JSON null) replaces the
    stored text when given."""
    f = {text(k): v for k, v in fields.items()}
    return RunRecord(
        tenant=tenant,
        run_id=run_id,
        blob=load_json(f["blob"]) if blob is _STORED else blob,
        version=int(f["version"]),
        status=text(f["status"]),
        session_id=opt_text(f.get("session")),
        input_tokens=int(f["input_tokens"]),
        output_tokens=int(f["output_tokens"]),
        cost_micros=int(f["cost_micros"]),
        iterations=int(f["iterations"]),
        cursor=int(f["cursor"]),
        created_at=float(text(f["created_at"])),
        updated_at=float(text(f["updated_at"])),
        seq=int(f["seq"]),
    )


def decode_session(tenant: str, session_id: str, fields: Mapping[Any, Any]) -> SessionRecord:
    """Build a SessionRecord from a session hash."""
    f = {text(k): v for k, v in fields.items()}
    return SessionRecord(
        tenant=tenant,
        session_id=session_id,
        blob=load_json(f["blob"]),
        version=int(f["version"]),
        created_at=float(text(f["created_at"])),
        updated_at=float(text(f["updated_at"])),
    )


def raise_refusal(reply: Sequence[Any], subject: str, expected: int = 0, what: str = "run") -> None:
    """Raise the error a script reported (``conflict``, ``lease_lost``), if it reported one."""
    status = text(reply[0])
    if status == "conflict":
        raise StateConflictError(expected, int(reply[1]), what=what)
    if status == "lease_lost":
        raise LeaseLostError(subject, text(reply[1]))  # type: ignore[arg-type]


_LAYOUT_REFUSAL = "RUNYARD_LAYOUT "


def layout_message(namespace: str, found: str, expected: str) -> str:
    """Why a queue refuses a namespace written in another key layout, and what to do."""
    return (
        f"queue namespace {namespace!r} was written in key layout version {found}; this runyard "
        f"reads layout version {expected}: drain it with the runyard release that wrote it, "
        "or use a new namespace (see docs/redis.md)"
    )


def layout_refusal(message: str, namespace: str) -> ConfigurationError | None:
    """The ConfigurationError for a queue script's ``RUNYARD_LAYOUT <found> <expected>`` error
    reply, or None for any other error."""
    if not message.startswith(_LAYOUT_REFUSAL):
        return None
    found, expected = message[len(_LAYOUT_REFUSAL) :].split()[:2]
    return ConfigurationError(layout_message(namespace, found, expected))


def refused_by_redis(exc: BaseException) -> ConfigurationError:
    """The error for a refusal ``classify`` calls "configuration" (never retried)."""
    return ConfigurationError(
        f"Redis refused this client: {exc}; check the URL's database number and scheme "
        "(redis+cluster:// for a cluster only), the username, password and ACL permissions in "
        "the URL or client (not retried)"
    )


def state_unavailable(message: str) -> StatePersistenceError:
    """The retryable error the state and execution stores raise when Redis cannot serve."""
    return StatePersistenceError(message, reason="unavailable")
