"""``webgym episodes``: start and stop a run's episodes on a stack whose workers already run.

The by-hand half of ``webgym run``: ``start`` sends the sampler a run's target (after checking
that every named set holds tasks) and, with ``--wait``, follows the run until its episodes are
judged; ``stop`` ends a run's sampling (episodes in flight run on). Both only write one event to
``webgym.curriculum``; the browser, policy and Faust workers do the rest.
"""

from __future__ import annotations

import time
import uuid
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from commands.errors import console, user_errors
from commands.local_run import RunFollower
from infra.producer import now_ms
from infra.settings import SettingsError, load_settings
from streams.targets import send_stop, start_sampling
from tasks.sets import parse_weights

episodes_app = typer.Typer(
    help="Start and stop a run's episodes on running workers (the by-hand `webgym run`).",
    no_args_is_help=True,
    add_completion=False,
)


@episodes_app.command()
@user_errors
def start(
    task_set: Annotated[
        str,
        typer.Option(
            help="the sets to draw from, NAME[=WEIGHT],... (e.g. practice-web/seed-0 or "
            "miniwob/train=2,practice-web/seed-0=1); `webgym tasks sets` lists them",
            show_default=False,
        ),
    ],
    in_flight: Annotated[int, typer.Option(min=1, help="episodes kept going at once")] = 8,
    episodes: Annotated[
        int | None, typer.Option(min=1, help="episodes in all (default: until stopped)")
    ] = None,
    run_id: Annotated[
        str | None,
        typer.Option(
            "--run",
            help="the run's id, the prefix of its episode ids (default: a new one); "
            "a run already going gets the new target",
        ),
    ] = None,
    seed: Annotated[int, typer.Option(help="seed of the run's task draws")] = 0,
    evaluation: Annotated[
        bool,
        typer.Option(
            "--eval", help="held-out episodes: none reaches the learner, the policy is greedy"
        ),
    ] = False,
    wait: Annotated[
        bool,
        typer.Option(help="follow the run until --episodes episodes ended and were judged"),
    ] = False,
    stall_timeout: Annotated[
        float, typer.Option(min=1.0, help="with --wait: give up after this long without progress")
    ] = 300.0,
) -> None:
    """Have the sampler keep --in-flight episodes of a run going, drawn from --task-set.

    Needs the stack, the tasks (`webgym tasks practice-web`, `webgym tasks miniwob` or `webgym
    tasks load FILE`) and running workers: `webgym sites serve`, `webgym worker browser`,
    `webgym worker policy` and `faust -A streams.app worker`. Sets that hold no task are refused,
    naming the sets that exist. Follow the run with `webgym stats --run RUN --follow`, or here
    with --wait; end it with `webgym episodes stop RUN`.
    """

    settings = load_settings()
    if wait and episodes is None:
        raise SettingsError("--wait follows a run to its end: give --episodes as well")
    weights = parse_weights(task_set)
    run = run_id or f"run{time.strftime('%Y%m%d%H%M%S')}{uuid.uuid4().hex[:4]}"
    since = now_ms() - 1000
    follower = RunFollower(settings, run, since) if wait else None
    purpose = "eval" if evaluation else "train"
    start_sampling(settings, run, weights, in_flight, episodes, seed=seed, purpose=purpose)
    budget = f"{episodes} episodes" if episodes else "episodes until stopped"
    console.print(
        f"run [bold]{run}[/]: {budget}, {in_flight} in flight, from {', '.join(weights)}. "
        f"Follow it with `webgym stats --run {run} --follow`; end it with "
        f"`webgym episodes stop {run}`.",
        highlight=False,
    )
    if follower is not None and episodes is not None:
        try:
            _follow(follower, episodes, stall_timeout)
        finally:
            follower.close()


def _follow(follower: RunFollower, episodes: int, stall_timeout_s: float) -> None:
    summary = follower.summary
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, TimeElapsedColumn(), console=console) as progress:
        bar = progress.add_task("judged", total=episodes)
        hint = (
            "are the browser, policy and Faust workers running, and the pages served? (see "
            "`webgym episodes start --help`)"
        )
        for _ in follower.until_done(episodes, stall_timeout_s, hint):
            progress.update(bar, completed=min(summary.judged, summary.ended))
        progress.update(bar, completed=episodes)
    console.print(
        f"run {summary.run_id}: {summary.ended} ended ({summary.finished} finished, "
        f"{summary.aborted} aborted), {summary.successes}/{summary.judged} judged successful, "
        f"{summary.steps} steps",
        highlight=False,
    )


@episodes_app.command()
@user_errors
def stop(
    run_id: Annotated[
        str, typer.Argument(metavar="RUN", help="the run to stop", show_default=False)
    ],
) -> None:
    """End a run's sampling: no episode of it starts after this; those in flight run on."""

    settings = load_settings()
    send_stop(settings, run_id)
    console.print(f"run {run_id}: sampling stopped (episodes in flight run to their end)")
