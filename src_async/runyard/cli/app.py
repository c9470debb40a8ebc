"""The ``runyard`` command's app (needs the cli extra: typer and rich)."""

from __future__ import annotations

import asyncio
from enum import Enum
from typing import Annotated, Any

from runyard.cli.demo import DemoPlan, DemoResult
from runyard.errors import ConfigurationError, RunyardError
from runyard.yard import default_url, redact

__all__ = ["app"]

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table


class Flavour(str, Enum):
    """Which twin runs the demo."""

    sync = "sync"
    async_ = "async"


def _run(plan: DemoPlan, flavour: Flavour, url: str, progress: Any, task: Any) -> DemoResult:
    def served(_tenant: str) -> None:
        progress.advance(task)

    if flavour is Flavour.sync:
        from runyard._sync.cli.demo import run_demo as run_sync

        return run_sync(plan, "sync", served, url=url)
    from runyard._async.cli.demo import run_demo as run_async

    return asyncio.run(run_async(plan, "async", served, url=url))


def _table(result: DemoResult, url: str) -> Table:
    table = Table(title=f"runyard demo ({result.flavour} twin, {redact(url)})")
    for column in ("tenant", "items", "done", "first served", "last served", "median"):
        table.add_column(column, justify="right" if column != "tenant" else "left")
    table.add_column("FIFO would serve", justify="right")
    table.add_column("input tokens", justify="right")
    for r in result.reports():
        table.add_row(
            r.tenant,
            str(r.items),
            str(r.completed),
            f"#{r.first}",
            f"#{r.last}",
            f"#{r.median:g}",
            f"#{r.fifo_first}-#{r.fifo_last}",
            str(r.tokens),
        )
    return table


def demo(
    flavour: Flavour = Flavour.async_,
    noisy_items: Annotated[int, typer.Option(min=1, help="items of the noisy tenant")] = 300,
    quiet_tenants: Annotated[int, typer.Option(min=1, help="how many quiet tenants")] = 4,
    quiet_items: Annotated[int, typer.Option(min=1, help="items per quiet tenant")] = 10,
    workers: Annotated[int, typer.Option(min=1, help="concurrent workers")] = 4,
    url: Annotated[
        str | None,
        typer.Option(
            help="where the stores live (default: $RUNYARD_URL, else sqlite:///runyard.db)"
        ),
    ] = None,
) -> None:
    """Enqueue work for a noisy tenant and quiet ones, serve it, and show nobody starved; on a
    SQLite file, also kill a worker process holding leases and show its items finished."""
    console = Console()
    url = url or default_url()
    try:
        plan = DemoPlan(
            noisy_items=noisy_items,
            quiet_tenants=quiet_tenants,
            quiet_items=quiet_items,
            workers=workers,
        )
    except ValueError as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(2) from None
    columns = (
        TextColumn("serving"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console) as progress:
        task = progress.add_task("serving", total=plan.total)
        try:
            result = _run(plan, flavour, url, progress, task)
        except (ConfigurationError, ValueError) as exc:  # a bad URL: its scheme or options
            console.print(f"[red]error:[/red] {escape(str(exc))}")
            raise typer.Exit(2) from None
        except RunyardError as exc:  # the store failed (a file locked past its busy timeout)
            console.print(f"[red]error:[/red] {escape(str(exc))}")
            raise typer.Exit(1) from None
    console.print(_table(result, url))
    if result.completed != plan.total or result.quiet_tenants_starved():
        console.print("[red]quiet tenants waited behind the noisy one[/red]")
        raise typer.Exit(1)
    quiet_done = max(r.last for r in result.reports() if r.tenant != "noisy")
    console.print(
        f"all {plan.total} items done; every quiet tenant was finished by item #{quiet_done} "
        f"of {plan.total} (FIFO would have kept them waiting until #{plan.total})."
    )
    crash = result.crash
    if crash is not None:
        finishers = ", ".join(f"{w} {n}" for w, n in sorted(crash.finished_by.items()))
        console.print(
            f"crash: worker process {crash.pid} finished {len(crash.finished)} of "
            f"{crash.items} items, then held {len(crash.held)} and was killed with SIGKILL; "
            f"once its leases lapsed they were finished by "
            f"{finishers}: {crash.done_once} of {crash.items} done exactly once, "
            f"{crash.done_twice} twice, {crash.lost} lost, {crash.left_in_queue} left."
        )
        if not crash.ok:
            console.print("[red]the killed worker's items were not all finished exactly once[/red]")
            raise typer.Exit(1)


def worker(
    handler: Annotated[str, typer.Argument(help="the handler, as module:function")],
    url: Annotated[
        str | None,
        typer.Option(
            help="the queue: sqlite:///path, redis://..., postgresql://... or memory:// "
            "(default: $RUNYARD_URL, else sqlite:///runyard.db)"
        ),
    ] = None,
    concurrency: Annotated[int, typer.Option(min=1, help="jobs at once")] = 1,
    sync: Annotated[bool, typer.Option("--sync", help="the thread twin (a plain handler)")] = False,
    shutdown_grace: Annotated[float, typer.Option(min=0, help="seconds to finish on stop")] = 30.0,
    handback_seconds: Annotated[
        float, typer.Option(min=0, help="seconds past the grace to hand the rest back")
    ] = 10.0,
    job_timeout: Annotated[
        float | None, typer.Option(help="seconds per job, more than 0 (default: none)")
    ] = None,
    lease_seconds: Annotated[float, typer.Option(min=0.1, help="the queue's lease length")] = 30.0,
    max_lease_seconds: Annotated[
        float, typer.Option(min=0.1, help="how long heartbeats may extend one claim")
    ] = 3600.0,
    max_attempts: Annotated[
        int, typer.Option(min=1, help="attempts before the dead letter (an item may set its own)")
    ] = 5,
) -> None:
    """Run a worker on the queue at URL until SIGTERM or SIGINT (twice: exit at once)."""
    from runyard.cli.worker import run_worker
    from runyard.errors import ConfigurationError
    from runyard.policy import QueuePolicy
    from runyard.worker.settings import WorkerSettings

    try:
        settings = WorkerSettings(
            concurrency=concurrency,
            shutdown_grace=shutdown_grace,
            handback_seconds=handback_seconds,
            job_timeout=job_timeout,
        )
        try:
            policy = QueuePolicy(
                lease_seconds=lease_seconds,
                max_lease_seconds=max_lease_seconds,
                max_attempts=max_attempts,
            )
        except ValueError as exc:  # QueuePolicy's own checks (a pair of options that clash)
            raise ConfigurationError(f"bad queue policy: {exc}") from None
        stats = run_worker(handler, url or default_url(), settings, sync=sync, policy=policy)
    except ConfigurationError as exc:
        Console(stderr=True).print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(2) from None
    Console(stderr=True).print(
        f"stopped: {stats.completed} completed, {stats.failed} failed, {stats.dead} dead, "
        f"{stats.handed_back} handed back"
    )


app = typer.Typer(help="runyard: durable run state and work queues.", no_args_is_help=True)
app.command(help=demo.__doc__)(demo)
app.command(help=worker.__doc__)(worker)


@app.callback()
def _root() -> None:
    """runyard's command line."""
