"""``webgym eval`` and ``webgym experiment learn``: the learning curve, measured through Kafka."""

from __future__ import annotations

import json
import signal
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from analytics.evaluation import curve
from commands.checkpoints import checkpoint_exists
from commands.children import stop_cleanly_on_sigterm
from commands.errors import user_errors
from commands.eval_run import EvalOptions, Evaluator
from commands.experiment import LearnOptions, run_learning
from commands.local_run import LocalLoop, RunOptions
from commands.options import FreshPerStep, PublishEvery, ReplayPerStep
from infra.provenance import provenance, write_result
from infra.settings import SettingsError, load_settings
from infra.tensorboard import ScalarLog
from infra.weights import announced_versions
from tasks import miniwob
from tasks.miniwob import DEFAULT_SEEDS as DEFAULT_MINIWOB_SEEDS

console = Console()
experiment_app = typer.Typer(
    help="Experiments: whole recipes through the pipeline, with result files.",
    no_args_is_help=True,
)
LEARNING_JSON = Path("bench/results/learning.json")


def parse_versions(text: str) -> list[int] | str:
    """``0,2,5`` -> [0, 2, 5]; ``all`` -> "all"; "" -> []."""
    if text.strip() in ("", "all"):
        return text.strip()
    try:
        versions = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise SettingsError(
            f"--versions {text!r}: give version numbers like 0,2,5 (0 = the base model) or all"
        ) from None
    if any(v < 0 for v in versions):
        raise SettingsError(f"--versions {text!r}: versions are 0 or more")
    return versions


def eval_command(
    model: Annotated[
        Path | None,
        typer.Option(
            help="the base checkpoint the policy's versions were trained from (the learner's "
            "--model); a policy worker serving it is started (not with --attach)"
        ),
    ] = None,
    policy_name: Annotated[str, typer.Option(help="the policy whose versions to evaluate")] = (
        "default"
    ),
    versions: Annotated[
        str,
        typer.Option(help="versions to evaluate, e.g. 0,2,5 (0 = the base model), or all"),
    ] = "",
    follow: Annotated[
        bool,
        typer.Option(
            help="then evaluate each version as it is announced (the newest one first), until "
            "Ctrl-C"
        ),
    ] = False,
    task_set: Annotated[str, typer.Option(help="the held-out task set")] = miniwob.HELDOUT_SET,
    per_task: Annotated[int, typer.Option(min=1, help="episodes per task and version")] = 1,
    in_flight: Annotated[int, typer.Option(min=1, help="evaluation episodes at once")] = 8,
    miniwob_seeds: Annotated[
        int,
        typer.Option(min=1, help="instances per MiniWoB++ page published for miniwob/heldout"),
    ] = DEFAULT_MINIWOB_SEEDS,
    pages: Annotated[
        str,
        typer.Option(
            help="MiniWoB++ pages published for miniwob/heldout, comma-separated (default: every "
            "page the heuristic policy solves); the set is what the tasks topic holds"
        ),
    ] = "",
    attach: Annotated[
        bool,
        typer.Option(
            help="use the workers already running on this stack (e.g. beside `webgym run "
            "--learner-model`) instead of starting them"
        ),
    ] = False,
    out: Annotated[Path | None, typer.Option(help="write the curve (JSON) here")] = None,
    plot: Annotated[Path | None, typer.Option(help="draw the curve (PNG) here")] = None,
    tensorboard: Annotated[
        Path | None, typer.Option(help="write held-out success per version to TensorBoard here")
    ] = None,
) -> None:
    """Evaluate frozen policy versions on a held-out task set, through the whole pipeline.

    Each version plays every task of --task-set --per-task times (the same instances for every
    version), served by exactly that version's weights and decoded greedily; its episodes are
    marked as evaluation and can never reach the learner. Results are events on
    webgym.eval.results (one per episode, one per version with a 95% interval overall and per
    task) and a table here; `webgym stats` shows them too. Without --attach it serves the pages
    and starts a browser worker, the stream processors and a policy worker serving --model.
    """

    settings = load_settings()
    wanted = parse_versions(versions)
    if not wanted and not follow:
        raise SettingsError("name versions to evaluate (--versions 0,2,5 or all) or --follow")
    if attach and model is not None:
        raise SettingsError("--attach uses the running policy worker: drop --model")
    if not attach and model is None:
        raise SettingsError(
            "--model DIR: the base checkpoint to serve (e.g. the learner's --model), or --attach "
            "to use workers already running"
        )
    if model is not None and not checkpoint_exists(str(model)):
        raise SettingsError(
            f"--model {model}: no such checkpoint directory (nor a model id in the local Hugging "
            "Face cache); build a small one with `webgym model tiny DIR`"
        )
    chosen_pages = _pages(pages) if pages else miniwob.MARKS_SOLVABLE
    rows: list[dict[str, Any]] = []
    scalars = ScalarLog(tensorboard)
    stop = threading.Event()

    def chosen_versions(settings) -> list[tuple[int, dict[str, Any] | None]]:
        announced = announced_versions(settings, policy_name)
        chosen = sorted({0, *announced}) if wanted == "all" else list(wanted or [])
        missing = [v for v in chosen if v and v not in announced]
        if missing:
            raise SettingsError(
                f"policy {policy_name!r} has no announced v{missing[0]}; announced: "
                f"{sorted(announced) or 'none'} (`webgym policy versions --policy-name NAME`)"
            )
        return [(v, announced.get(v)) for v in chosen]

    def evaluate_all(evaluator: Evaluator, queue: list[tuple[int, Any]]) -> None:
        # Ctrl-C ends a --follow after the version under evaluation.
        previous = signal.signal(signal.SIGINT, lambda *_: stop.set()) if follow else None
        try:
            _evaluate_queue(evaluator, queue)
        finally:
            if previous is not None:
                signal.signal(signal.SIGINT, previous)

    def _evaluate_queue(evaluator: Evaluator, queue: list[tuple[int, Any]]) -> None:
        follower = evaluator.follow(stop.is_set) if follow else iter(())
        while queue or follow:
            if not queue:
                try:
                    event = next(follower)
                except StopIteration:
                    break
                if event["policy_version"] in {r["policy_version"] for r in rows}:
                    continue
                queue.append((event["policy_version"], event))
            version, event = queue.pop(0)
            with _bar(f"v{version}", evaluator.episodes_per_version) as advance:
                result = evaluator.evaluate(version, event, on_episode=lambda _: advance())
            rows.append(result)
            scalars.scalar("heldout/success", result["successes"] / result["episodes"], version)
            scalars.flush()
            _print_version(result)
            if stop.is_set():
                break

    options = EvalOptions(task_set=task_set, per_task=per_task, in_flight=in_flight,
                          policy_name=policy_name)  # fmt: skip
    if attach:
        queue = chosen_versions(settings)  # refused before anything is sent
        evaluator = Evaluator(settings, options, report=console.print)
        stop_cleanly_on_sigterm()
        evaluate_all(evaluator, queue)
    else:
        run = RunOptions(
            task_set=task_set,
            miniwob_seeds=miniwob_seeds,
            miniwob_pages=chosen_pages,
            policy="local",
            policy_args=("--model", str(model), "--policy-name", policy_name),
        )
        stop_cleanly_on_sigterm()
        with LocalLoop(settings, run, report=console.print) as loop:
            evaluate_all(
                Evaluator(loop.settings, options, check=loop.check), chosen_versions(loop.settings)
            )
    scalars.close()
    _write_outputs(rows, out, plot, f"held-out success of {policy_name} on {task_set}")


def _pages(text: str) -> tuple[str, ...]:
    chosen = tuple(p.strip() for p in text.split(",") if p.strip())
    unknown = [p for p in chosen if p not in miniwob.available()]
    if not chosen or unknown:
        raise SettingsError(
            f"--pages: unknown MiniWoB++ page {unknown[0] if unknown else '(none given)'}; "
            "`webgym tasks miniwob --help` lists them"
        )
    return chosen


def _bar(label: str, total: int):

    @contextmanager
    def bar():
        progress = Progress(
            TextColumn(f"[bold]{label}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        with progress:
            task = progress.add_task(label, total=total)
            yield lambda: progress.advance(task)

    return bar()


def _print_version(result: dict[str, Any]) -> None:
    rate = result["successes"] / max(result["episodes"], 1)
    per_task = "  ".join(
        f"{row['task']} {row['successes']}/{row['episodes']}" for row in result["by_task"]
    )
    console.print(
        f"v{result['policy_version']}: held-out success [bold]{rate:.0%}[/] "
        f"({result['successes']}/{result['episodes']}, 95% [{result['ci_low']:.0%}, "
        f"{result['ci_high']:.0%}])  {per_task}"
    )


def _write_outputs(rows: list[dict[str, Any]], out: Path | None, plot: Path | None, title: str):

    points = curve(rows)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(points, indent=2) + "\n")
        console.print(f"wrote {out}")
    if plot:
        from analytics.plots import write_learning_curve  # matplotlib: only for a plot

        write_learning_curve(points, plot, title)
        console.print(f"wrote {plot}")


@experiment_app.command("learn")
@user_errors
def experiment_learn(
    out: Annotated[Path, typer.Option(help="the result file")] = LEARNING_JSON,
    plot: Annotated[Path | None, typer.Option(help="the curve (default: OUT with .png)")] = None,
    tensorboard: Annotated[
        Path | None,
        typer.Option(help="TensorBoard event files: the learner's loss and the held-out curve"),
    ] = None,
    model: Annotated[
        Path | None, typer.Option(help="base checkpoint (default: a fresh `webgym model tiny`)")
    ] = None,
    pages: Annotated[str, typer.Option(help="MiniWoB++ pages, comma-separated")] = ",".join(
        miniwob.CLICK_AND_TYPE
    ),
    train_seeds: Annotated[int, typer.Option(min=1, help="training instances per page")] = 80,
    heldout_seeds: Annotated[int, typer.Option(min=1, help="held-out instances per page")] = 10,
    warm_start_episodes: Annotated[
        int, typer.Option(min=1, help="the warm start's budget: teacher episodes")
    ] = 120,
    on_policy_episodes: Annotated[
        int, typer.Option(min=0, help="episodes the model plays itself (0: warm start only)")
    ] = 160,
    temperature: Annotated[
        float, typer.Option(min=0.0, help="the model's sampling temperature on training rollouts")
    ] = 0.7,
    lr: Annotated[float, typer.Option(min=0.0, help="learning rate (full fine-tuning)")] = 1e-3,
    publish_every: PublishEvery = 36,
    fresh_per_step: FreshPerStep = 2,
    replay_per_step: ReplayPerStep = 14,
    seed: Annotated[int, typer.Option(help="sampling and replay seed")] = 0,
) -> None:
    """Does the loop learn? Warm start, on-policy training and evaluation, all through Kafka.

    Publishes seeded MiniWoB++ training and held-out instances (disjoint seeds) as this
    experiment's own task sets; evaluates the base model; the heuristic teacher plays the warm
    start while the learner clones its successes; then the model plays itself (sampling at
    --temperature) and the learner trains on its own successes with no barrier; every published
    version is evaluated on the held-out instances (greedy, pinned). Writes OUT (held-out success
    by version and by wall-clock with 95% intervals, samples per phase, staleness, provenance)
    and the curve as a PNG.
    """

    settings = load_settings()
    chosen = _pages(pages)
    produced_by = provenance()
    options = LearnOptions(
        pages=chosen,
        train_seeds=train_seeds,
        heldout_seeds=heldout_seeds,
        warm_start_episodes=warm_start_episodes,
        on_policy_episodes=on_policy_episodes,
        temperature=temperature,
        learning_rate=lr,
        publish_every=publish_every,
        fresh_per_step=fresh_per_step,
        replay_per_step=replay_per_step,
        model=str(model) if model else None,
        tensorboard=str(tensorboard) if tensorboard else None,
        seed=seed,
    )
    stop_cleanly_on_sigterm()
    result = run_learning(settings, options, report=console.print)
    write_result(out, result, produced_by=produced_by)

    from analytics.plots import write_learning_curve  # matplotlib: only for the plot

    picture = plot or out.with_suffix(".png")
    write_learning_curve(
        result["versions"],
        picture,
        f"tiny Qwen-VL on {len(chosen)} MiniWoB++ pages: warm start, then on-policy",
    )
    console.print(
        f"initial {result['initial_success']:.0%} -> final {result['final_success']:.0%} in "
        f"{result['wall_clock_s'] / 60:.1f} min; wrote {out} and {picture}"
    )
