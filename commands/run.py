"""``webgym run``: the whole asynchronous rollout loop on the local stack, with a summary."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from agents.policy.main import BACKENDS
from commands.checkpoints import checkpoint_exists
from commands.errors import console, user_errors
from commands.local_run import RunOptions, run_local
from infra.provenance import write_result
from infra.settings import SettingsError, load_settings
from schemas.difficulty import DIFFICULTIES
from tasks.miniwob import DEFAULT_SEEDS as DEFAULT_MINIWOB_SEEDS
from tasks.sets import parse_weights


@user_errors
def run(
    episodes: Annotated[int, typer.Option(min=1, help="episodes to run (and judge)")] = 60,
    in_flight: Annotated[int, typer.Option(min=1, help="episodes kept in flight at once")] = 8,
    task_set: Annotated[
        str,
        typer.Option(
            "--task-set",
            "--task-sets",
            help="task sets to draw from, NAME or NAME=WEIGHT,... e.g. "
            "miniwob/train=2,practice-web/seed-0=1; nothing else is drawn "
            "(default: practice-web/seed-<--seed>)",
        ),
    ] = "",
    tasks: Annotated[
        str,
        typer.Option(
            "--tasks",
            help="shorthand: practice-web (= practice-web/seed-<--seed>) or miniwob "
            "(= miniwob/train)",
        ),
    ] = "",
    miniwob_seeds: Annotated[
        int,
        typer.Option(
            min=1,
            help="instances (seeds) per MiniWoB++ page published for miniwob/train and "
            "miniwob/heldout",
        ),
    ] = DEFAULT_MINIWOB_SEEDS,
    policy: Annotated[
        str,
        typer.Option(
            help="policy backend: scripted (practice-web ground truth), heuristic (MiniWoB++), "
            "local, openai, vllm; default: heuristic on MiniWoB++ sets, else scripted"
        ),
    ] = "",
    model: Annotated[str, typer.Option(help="checkpoint or served model (not scripted)")] = "",
    base_url: Annotated[str | None, typer.Option(help="openai: the server's /v1 URL")] = None,
    error_rate: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="scripted: share of steps that go wrong")
    ] = 0.3,
    sites: Annotated[int, typer.Option(min=1, help="practice-web sites to generate")] = 50,
    seed: Annotated[int, typer.Option(help="sites, tasks and sampling seed")] = 0,
    ratios: Annotated[
        str,
        typer.Option(help="sampling weight per difficulty, e.g. easy=2,hard=1 (default uniform)"),
    ] = "",
    summary_json: Annotated[
        Path | None, typer.Option(help="also write the summary figures to this JSON file")
    ] = None,
    learner_model: Annotated[
        Path | None,
        typer.Option(
            help="also run the learner on this base checkpoint (e.g. from `webgym model tiny`); "
            "it trains on the run's successes and publishes versions the policy worker loads"
        ),
    ] = None,
) -> None:
    """The main job: the whole rollout loop on the practice web, on the local stack.

    Starts Kafka and MinIO, creates the topics, publishes the built-in task sets the run names,
    serves the practice web, starts a browser worker, a policy worker and the Faust stream
    processors, keeps --in-flight episodes running until --episodes are judged, then prints a
    summary. Logs of every worker are in <state dir>/logs/<run id>/.

    Episodes are drawn only from --task-set, whatever else the tasks topic holds; other runs on
    the same stack keep their own sets. Built-in sets, published when named:
    practice-web/seed-K (and its split by website, practice-web/seed-K/train and .../test),
    miniwob/train and miniwob/heldout (--miniwob-seeds instances of each MiniWoB++ page the
    heuristic policy solves; disjoint seeds). Other sets must be published first (`webgym tasks
    load FILE --task-set NAME`); `webgym tasks sets` lists what the tasks topic holds.
    """

    settings = load_settings()
    if tasks and task_set:
        raise SettingsError("give --task-set or its shorthand --tasks, not both")
    if tasks not in ("", "practice-web", "miniwob"):
        raise SettingsError(
            f"--tasks {tasks!r}: choose practice-web or miniwob, or name sets with --task-set"
        )
    task_set = task_set or tasks or "practice-web"
    sets = list(parse_weights(task_set)) if task_set not in ("practice-web", "miniwob") else []
    on_miniwob = task_set == "miniwob" or (sets and all(s.startswith("miniwob") for s in sets))
    policy = policy or ("heuristic" if on_miniwob else "scripted")
    # Refused here, before anything starts or is published, not by a worker that dies later.
    _check_policy_choice(policy, model, base_url)
    if learner_model is not None and not checkpoint_exists(str(learner_model)):
        raise SettingsError(
            f"--learner-model {learner_model}: no such checkpoint directory (nor a model id in "
            "the local Hugging Face cache); build a small one with `webgym model tiny DIR`"
        )
    policy_args: list[str] = []
    if model:
        policy_args += ["--model", model]
    if base_url:
        policy_args += ["--base-url", base_url]
    options = RunOptions(
        task_set=task_set,
        miniwob_seeds=miniwob_seeds,
        difficulty_ratios=_ratios(ratios),
        episodes=episodes,
        in_flight=in_flight,
        policy=policy,
        policy_args=tuple(policy_args),
        error_rate=error_rate,
        sites=sites,
        seed=seed,
        learner_model=str(learner_model) if learner_model else None,
        # A short run: train whatever arrived after 5 quiet seconds.
        learner_args=("--policy-name", "default", "--idle-s", "5"),
    )
    progress = Progress(
        TextColumn("[bold]episodes"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[detail]}"),
        TimeElapsedColumn(),
        console=console,
    )
    with console.status("preparing...") as spinner:
        bar: list[int] = []

        def on_progress(summary, children) -> None:
            if not bar:
                spinner.stop()
                progress.start()
                bar.append(progress.add_task("run", total=episodes, detail=""))
            detail = (
                f"in flight {summary.started - summary.ended}  finished {summary.finished}  "
                f"aborted {summary.aborted}  success {summary.success_rate:.0%}  "
                f"{summary.steps_per_s:.1f} steps/s"
            )
            progress.update(bar[0], completed=summary.judged, detail=detail)

        def report(line: str) -> None:  # each step of the start stays on screen
            spinner.update(line)
            console.print(line, style="dim", highlight=False, markup=False)

        try:
            summary = run_local(settings, options, report=report, on_progress=on_progress)
        finally:
            progress.stop()
    _print_summary(summary)
    if summary_json is not None:
        write_result(summary_json, summary.figures())
        console.print(f"summary written to {summary_json}")


def _check_policy_choice(policy: str, model: str, base_url: str | None) -> None:

    if policy not in BACKENDS:
        raise SettingsError(f"--policy {policy!r}: choose one of {', '.join(BACKENDS)}")
    if policy in ("local", "vllm", "openai") and not model:
        raise SettingsError(f"--policy {policy} needs --model (a checkpoint or served model)")
    if policy == "openai" and not base_url:
        raise SettingsError("--policy openai needs --base-url (e.g. http://127.0.0.1:8000/v1)")


def _ratios(text: str) -> dict[str, float]:
    ratios = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, value = part.partition("=")
        try:
            ratios[name.strip()] = float(value)
        except ValueError:
            raise SettingsError(
                f"--ratios: {part!r} is not difficulty=weight; write e.g. easy=2,medium=1,hard=1"
            ) from None
        if name.strip() not in DIFFICULTIES:
            raise SettingsError(
                f"--ratios: {name.strip()!r} is not a difficulty; the difficulties are "
                f"{', '.join(DIFFICULTIES)} (e.g. easy=2,medium=1,hard=1)"
            )
        if ratios[name.strip()] < 0:
            raise SettingsError(f"--ratios: {part!r} has a negative weight; use 0 or more")
    if ratios and not any(weight > 0 for weight in ratios.values()):
        raise SettingsError("--ratios: at least one difficulty needs a weight above 0")
    return ratios


def _print_summary(summary) -> None:
    table = Table(title=f"run {summary.run_id}")
    table.add_column("figure")
    table.add_column("value", justify="right")
    rows = [
        ("episodes started", summary.started),
        (
            "episodes ended",
            f"{summary.ended} ({summary.finished} finished, {summary.aborted} aborted)",
        ),
        ("judged", summary.judged),
        ("successes", f"{summary.successes} ({summary.success_rate:.1%})"),
        ("judge errors", summary.judge_errors),
        ("steps", summary.steps),
        (
            "steps filtered as repetitions",
            f"{summary.repeated_steps} ({summary.repetition_share:.1%})",
        ),
        ("wall time", f"{summary.wall_s:.1f} s"),
        ("steps per second", f"{summary.steps_per_s:.2f}"),
        ("episodes per hour", f"{summary.episodes_per_hour:.0f}"),
    ]
    for reason, count in summary.terminations.most_common():
        rows.append((f"ended by {reason}", count))
    for name, value in rows:
        table.add_row(name, str(value))
    console.print(table)
