"""The ``webgym`` command line. Errors are sorted here, at the edge: every known failure prints
what went wrong and what to do next, and exits non-zero; anything else is a bug and crashes
loudly with its traceback."""

from __future__ import annotations

import datetime
import json
import os
import time
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Column, Table

from analytics import check_cli, dashboard_cli, replay_cli, rescore_cli, stats_cli
from analytics.errors import AnalyticsError
from infra import stack
from infra.chromium import ChromiumMissing
from infra.eval_run import EvalFailed
from infra.learning_cli import checkpoint_exists as _checkpoint_exists
from infra.learning_cli import eval_command, experiment_app, experiment_learn
from infra.local_run import RunFailed
from infra.objects import ObjectStoreError
from infra.producer import DeliveryError
from infra.settings import Settings, SettingsError, load_settings
from infra.topic_admin import (
    BrokerUnreachable,
    TopicMissing,
    create_topics,
    describe_topics,
    require_partition_counts,
    topic_states,
)
from infra.topics import MIB, TOPICS
from infra.weights import WeightsRejected
from schemas.difficulty import DIFFICULTIES
from sites.cli import sites_app
from tasks.cli import tasks_app
from tasks.miniwob import DEFAULT_SEEDS as DEFAULT_MINIWOB_SEEDS
from tasks.sets import TaskSetError, parse_weights

console = Console()
errors = Console(stderr=True)

app = typer.Typer(
    help="webgym-streams: training environment and online RL loop for visual web agents, "
    "event-sourced on Apache Kafka. Start with `webgym up`, then `webgym run`.",
    no_args_is_help=True,
    add_completion=False,
)
topics_app = typer.Typer(help="The Kafka topics of the topic table.", no_args_is_help=True)
app.add_typer(topics_app, name="topics")
app.add_typer(sites_app, name="sites")
app.add_typer(tasks_app, name="tasks")
worker_app = typer.Typer(
    help="Workers: consumer-group members that serve one topic family.", no_args_is_help=True
)
app.add_typer(worker_app, name="worker")
model_app = typer.Typer(help="Model checkpoints.", no_args_is_help=True)
app.add_typer(model_app, name="model")
policy_app = typer.Typer(
    help="Published policy versions (weights in MinIO, announced on webgym.policy.versions).",
    no_args_is_help=True,
)
app.add_typer(policy_app, name="policy")
bench_app = typer.Typer(help="Benchmarks; results in bench/results/.", no_args_is_help=True)
app.add_typer(bench_app, name="bench")
app.add_typer(experiment_app, name="experiment")

KNOWN_ERRORS = (
    stack.StackError,
    BrokerUnreachable,
    SettingsError,
    ChromiumMissing,
    DeliveryError,
    TopicMissing,
    RunFailed,
    WeightsRejected,
    AnalyticsError,
    TaskSetError,
    EvalFailed,
    ObjectStoreError,
)


def _settings() -> Settings:
    return load_settings()


def user_errors(command: Callable[..., Any]) -> Callable[..., Any]:
    """Turn the known failures into a red message and exit code 1."""

    @wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except KNOWN_ERRORS as exc:
            errors.print(f"[bold red]error:[/] {exc}", highlight=False, markup=True)
            raise typer.Exit(1) from None

    return wrapper


app.command("eval")(user_errors(eval_command))
experiment_app.command("learn")(user_errors(experiment_learn))


def _since(timestamp: float | None) -> str:
    if timestamp is None:
        return "-"
    started = datetime.datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M:%S")
    return f"{started} ({int(time.time() - timestamp)} s ago)"


@app.command()
@user_errors
def up(
    topics: bool = typer.Option(True, help="also create the topics of the table"),
) -> None:
    """Start the local stack (Kafka KRaft node + MinIO on loopback) and wait until both answer.

    Safe to run again: what already runs is left alone. The first run fetches Kafka with Maven
    and builds MinIO with Go into the cache dir (a few minutes); later runs take seconds.
    """
    settings = _settings()
    started = time.monotonic()
    with console.status("starting the local stack...") as spinner:
        timings = stack.up(
            settings, report=lambda line: (spinner.update(line), console.print(line))
        )
        if topics:
            spinner.update("creating topics...")
            states = create_topics(settings)
    created = [s.name for s in states if s.outcome == "created"] if topics else []
    console.print(
        f"[green]stack up[/] in {time.monotonic() - started:.1f}s "
        f"(kafka {settings.bootstrap_servers}, minio {settings.minio_endpoint}); "
        f"logs in {settings.logs_dir}"
    )
    if created:
        console.print(f"created {len(created)} topics")
    if timings.get("minio_build_s", 0) > 1 or timings.get("kafka_jars_s", 0) > 1:
        console.print(f"first-time set-up: {', '.join(f'{k} {v:.0f}' for k, v in timings.items())}")
    console.print("stop it with `webgym down`")


@app.command()
@user_errors
def down() -> None:
    """Stop the processes `webgym up` started (and only those). Data stays in the state dir."""
    settings = _settings()
    stopped = stack.down(settings)
    console.print(f"stopped: {', '.join(stopped)}" if stopped else "nothing was running")


@app.command()
@user_errors
def status() -> None:
    """What the local stack runs, where, and since when."""
    settings = _settings()
    table = Table("service", "state", "address", "pid", "since", "detail")
    for row in stack.status(settings):
        colour = {"running": "green", "present": "green"}.get(row.state, "red")
        table.add_row(
            row.name,
            f"[{colour}]{row.state}[/]",
            row.address,
            str(row.pid or "-"),
            _since(row.since),
            row.detail,
        )
    console.print(table)
    console.print(f"state dir {settings.state_dir}, cache dir {settings.cache_dir}")


@app.command()
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
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from infra.local_run import RunOptions, run_local

    settings = _settings()
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
    if learner_model is not None and not _checkpoint_exists(str(learner_model)):
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
        summary_json.parent.mkdir(parents=True, exist_ok=True)
        summary_json.write_text(json.dumps(summary.figures(), indent=2) + "\n")
        console.print(f"summary written to {summary_json}")


@app.command()
@user_errors
def smoke() -> None:
    """Check the local stack end to end in seconds, without the loop.

    A Chromium screenshot of a local page, carried as an observation event through Kafka and a
    consumer group, and stored in MinIO; any mismatch fails with a non-zero exit.
    """
    from infra.smoke import run_smoke  # imports Playwright: only when the job runs

    settings = _settings()
    with console.status("starting the local stack...") as spinner:
        stack.up(settings, report=spinner.update)
        spinner.update("creating topics...")
        create_topics(settings)
        result = run_smoke(settings, progress=spinner.update)
    console.print(
        f"[green]ok[/] episode {result.episode_id}: screenshot {result.screenshot_bytes} bytes "
        f"of '{result.title}', Kafka round trip {result.kafka_round_trip_s * 1000:.0f} ms, "
        f"stored at {result.minio_object}"
    )


def _check_policy_choice(policy: str, model: str, base_url: str | None) -> None:
    from agents.policy.main import BACKENDS

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


@topics_app.command("create")
@user_errors
def topics_create() -> None:
    """Create every topic of the table that is missing. Idempotent; reports partition mismatches."""
    settings = _settings()
    states = create_topics(settings)
    mismatched = [s for s in states if s.outcome == "mismatch"]
    for state in states:
        console.print(f"{state.outcome:>8}  {state.name}")
    if mismatched:
        for state in mismatched:
            errors.print(
                f"[yellow]warning:[/] {state.name} has {state.actual_partitions} partitions, the "
                f"table says {state.expected_partitions}. Episode-keyed topics must share one "
                "count; recreate the topic or set WEBGYM_DEFAULT_PARTITIONS to match."
            )
        raise typer.Exit(2)


@topics_app.command("list")
@user_errors
def topics_list() -> None:
    """The topic table, and whether each topic exists on the cluster."""
    settings = _settings()
    table = Table("key", "parts", "retention", "cleanup", "max msg", "cluster")
    table.columns.insert(0, Column("topic", no_wrap=True))
    for state in topic_states(settings):
        spec = state.spec
        retention = "forever" if spec.retention_ms < 0 else f"{spec.retention_ms // 86_400_000} d"
        on_cluster = {
            "exists": "[green]yes[/]",
            "missing": "[red]missing[/]",
            "mismatch": f"[yellow]{state.actual_partitions} partitions[/]",
        }[state.outcome]
        table.add_row(
            state.name,
            spec.key,
            str(state.expected_partitions),
            retention,
            spec.cleanup_policy,
            f"{spec.max_message_bytes / MIB:g} MiB",
            on_cluster,
        )
    console.print(table)


@topics_app.command("describe")
@user_errors
def topics_describe(
    names: Annotated[
        list[str] | None,
        typer.Argument(help="topic names (default: every topic of the table)"),
    ] = None,
) -> None:
    """The broker's effective settings of the topics (partitions, retention, cleanup, size)."""
    settings = _settings()
    names = names or [spec.name(settings) for spec in TOPICS]
    shown = ("cleanup.policy", "retention.ms", "max.message.bytes", "min.insync.replicas")
    partitions = {s.name: s.actual_partitions for s in topic_states(settings)}
    table = Table("topic", "partitions", *shown)
    for name, config in describe_topics(settings, names).items():
        table.add_row(
            name, str(partitions.get(name, "?")), *(config.get(key, "-") for key in shown)
        )
    console.print(table)


@worker_app.command("browser")
@user_errors
def worker_browser(
    concurrency: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="actions (click, type, scroll...) served at once "
            "(default: WEBGYM_BROWSER_ACT_CONCURRENCY, 8)",
        ),
    ] = None,
    navigate_concurrency: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="navigations served at once (default: WEBGYM_BROWSER_NAVIGATE_CONCURRENCY, 4)",
        ),
    ] = None,
    group: Annotated[str, typer.Option(help="consumer group; one per fleet")] = "webgym-browser",
    fault_injection: Annotated[
        bool,
        typer.Option(help="let tasks open chrome://crash and chrome://hang (chaos tests only)"),
    ] = False,
) -> None:
    """Serve browser operations (navigate, act) with Playwright and Chromium, emit observations.

    Joins the consumer group over webgym.ops.navigate, webgym.ops.act and webgym.episodes; start
    as many workers as you like, on any host: partitions (and so episodes) spread over them.
    Practice-web hosts (*.webgym.test) resolve to WEBGYM_PRACTICE_WEB_ADDRESS.
    """
    from agents.browser.main import run_browser_worker
    from agents.browser.worker import BrowserWorkerConfig
    from infra.chromium import launch_options

    settings = _settings()
    launch_options(settings)  # a missing Chromium is refused now, not at the first episode
    require_partition_counts(settings)  # contexts are held by partition
    config = BrowserWorkerConfig.from_settings(
        settings,
        act_concurrency=concurrency or settings.browser_act_concurrency,
        navigate_concurrency=navigate_concurrency or settings.browser_navigate_concurrency,
        group_id=group,
        client_id=f"{group}-{os.getpid()}",
        fault_injection=fault_injection,
    )
    run_browser_worker(settings, config)


@worker_app.command("policy")
@user_errors
def worker_policy(
    backend: Annotated[
        str,
        typer.Option(
            help="local (transformers), openai (HTTP), vllm (GPU), scripted (practice-web ground "
            "truth), heuristic (MiniWoB++ by the marks table) or latency-model (the rollout "
            "benchmark: scripted steps, each as slow as a VLM's inference)"
        ),
    ] = "local",
    model: Annotated[
        str,
        typer.Option(help="checkpoint directory or model id (local, vllm); served name (openai)"),
    ] = "",
    base_url: Annotated[
        str | None, typer.Option(help="OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1")
    ] = None,
    policy_name: Annotated[str, typer.Option(help="follow versions of this policy")] = "default",
    batch_size: Annotated[
        int | None,
        typer.Option(min=1, help="requests per backend call (default 8; latency-model: 1)"),
    ] = None,
    concurrency: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="backend calls in flight at once (default 1; latency-model: 64, or --sync-batch "
            "if larger)",
        ),
    ] = None,
    max_new_tokens: Annotated[int, typer.Option(min=1, help="reply length limit")] = 512,
    temperature: Annotated[
        float | None,
        typer.Option(
            min=0.0,
            help="local, vllm, openai: sampling temperature, 0 = greedy (default: "
            "WEBGYM_POLICY_TEMPERATURE, 0); recorded on every inference event",
        ),
    ] = None,
    top_p: Annotated[
        float | None,
        typer.Option(
            min=0.0,
            max=1.0,
            help="local, vllm, openai: nucleus sampling mass above temperature 0, 1 = no cut "
            "(default: WEBGYM_POLICY_TOP_P, 1); recorded on every inference event",
        ),
    ] = None,
    base_model: Annotated[
        str | None,
        typer.Option(
            help="local, vllm, openai: the base model published versions must be trained from "
            "(the learner's --model); versions of another base are refused (default: --model)",
        ),
    ] = None,
    device: Annotated[str, typer.Option(help="local backend device: cpu, cuda")] = "cpu",
    error_rate: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="scripted: share of steps that go wrong")
    ] = 0.0,
    sites_count: Annotated[
        int, typer.Option(help="scripted, latency-model: practice-web sites it knows")
    ] = 50,
    sites_seed: Annotated[int, typer.Option(help="scripted, latency-model: practice-web seed")] = 0,
    latency_median: Annotated[
        float,
        typer.Option(min=0.0, help="latency-model: median seconds of one inference (lognormal)"),
    ] = 1.5,
    latency_sigma: Annotated[
        float, typer.Option(min=0.0, help="latency-model: lognormal shape of the inference time")
    ] = 0.7,
    workload_seed: Annotated[
        int,
        typer.Option(
            help="latency-model: seed of latencies and episode lengths (same in both modes)"
        ),
    ] = 0,
    sync_batch: Annotated[
        int,
        typer.Option(
            min=0,
            help="latency-model: step lock-step batches of this many episodes (one run id each; "
            "run a single policy worker); 0 = asynchronous",
        ),
    ] = 0,
    infer_timeout: Annotated[
        float | None,
        typer.Option(
            help="seconds a backend call may take; past it each of its requests is answered with "
            "an error inference, the episode asks again within its parse-error budget, and the "
            "late reply is dropped (default: WEBGYM_POLICY_INFER_TIMEOUT_S, 90; keep it below "
            "the episode lease, WEBGYM_EPISODE_LEASE_S)"
        ),
    ] = None,
    group: Annotated[str, typer.Option(help="consumer group; one per fleet")] = "webgym-policy",
) -> None:
    """Serve inference requests (webgym.ops.infer) with a model and emit inference events.

    Every reply is parsed strictly (Thought / Action / <tool_call> / Memory). New versions on
    webgym.policy.versions are fetched from MinIO, verified by sha256 and swapped in between
    batches (a failed swap is retried; the last good version keeps serving); versions trained
    from another base model are refused. Replies are greedy unless --temperature is above 0.
    Build a tiny test model with `webgym model tiny DIR`; `--backend scripted` solves
    practice-web tasks from their ground truth. `--backend latency-model` is the rollout
    benchmark's policy: scripted steps, each held for a lognormal VLM-like inference time, answering
    at a drawn step; `--sync-batch 32` steps batches of 32 episodes in lock-step. A backend call
    slower than `--infer-timeout` is answered with errors, and the orchestrator asks again.
    """
    from agents.policy.main import (
        BackendOptions,
        backend_factory,
        base_model_of,
        run_policy_worker,
        serving_shape,
    )
    from agents.policy.worker import PolicyWorkerConfig

    settings = _settings()
    if infer_timeout is not None and infer_timeout <= 0:
        raise SettingsError(f"--infer-timeout must be more than 0 seconds, got {infer_timeout:g}")
    require_partition_counts(settings)  # per-episode state is held by partition
    options = BackendOptions(
        backend=backend,
        model=model,
        base_url=base_url,
        max_new_tokens=max_new_tokens,
        device=device,
        error_rate=error_rate,
        sites_count=sites_count,
        sites_seed=sites_seed,
        temperature=settings.policy_temperature if temperature is None else temperature,
        top_p=settings.policy_top_p if top_p is None else top_p,
        base_model=base_model or "",
        latency_median_s=latency_median,
        latency_sigma=latency_sigma,
        workload_seed=workload_seed,
        horizons=dict(settings.horizons),  # episodes must answer before the orchestrator's horizon
        sync_batch=sync_batch,
    )
    try:
        batch_size, concurrency = serving_shape(options, batch_size, concurrency)
        factory = backend_factory(options)
    except ValueError as exc:
        raise SettingsError(str(exc)) from exc
    config = PolicyWorkerConfig(
        backend_name=backend,
        policy_name=policy_name,
        group_id=group,
        client_id=f"{group}-{os.getpid()}",
        batch_size=batch_size,
        concurrency=concurrency,
        infer_timeout_s=infer_timeout,
        base_model=base_model_of(options),
    )
    run_policy_worker(settings, config, factory)


@app.command()
@user_errors
def learner(
    model: Annotated[
        str, typer.Option(help="base checkpoint: a directory, or a model id in the local HF cache")
    ],
    policy_name: Annotated[str, typer.Option(help="publish versions of this policy")] = "default",
    lora_rank: Annotated[
        int,
        typer.Option(min=0, help="LoRA rank on the attention projections; 0 = full fine-tuning"),
    ] = 16,
    lora_alpha: Annotated[int, typer.Option(min=1, help="LoRA scaling numerator")] = 32,
    lr: Annotated[float, typer.Option(min=0.0, help="AdamW learning rate")] = 1e-4,
    fresh_per_step: Annotated[
        int, typer.Option(min=1, help="new samples per optimiser step (whole trajectories)")
    ] = 8,
    replay_per_step: Annotated[
        int, typer.Option(min=0, help="recency-weighted window samples per optimiser step")
    ] = 8,
    publish_every: Annotated[int, typer.Option(min=1, help="optimiser steps per version")] = 4,
    window: Annotated[int, typer.Option(min=1, help="samples kept for replay")] = 256,
    half_life: Annotated[
        float, typer.Option(min=0.001, help="recency half-life of replay draws, in samples")
    ] = 64.0,
    max_staleness: Annotated[
        int, typer.Option(min=0, help="drop samples from policies more versions behind than this")
    ] = 4,
    keep_versions: Annotated[
        int, typer.Option(min=1, help="versions kept in MinIO for rollback")
    ] = 5,
    idle_s: Annotated[
        float, typer.Option(min=0.0, help="input quiet this long: train what is pending, publish")
    ] = 30.0,
    exit_when_idle: Annotated[
        bool, typer.Option(help="exit once input is idle and everything is published")
    ] = False,
    device: Annotated[str, typer.Option(help="cpu, cuda or cuda:N (bf16 on GPUs)")] = "cpu",
    gradient_checkpointing: Annotated[
        bool, typer.Option(help="trade compute for memory (large models on one GPU)")
    ] = False,
    group: Annotated[str, typer.Option(help="consumer group on the success stream")] = (
        "webgym-learner"
    ),
    seed: Annotated[int, typer.Option(help="seed of the replay draws")] = 0,
    tensorboard: Annotated[
        Path | None,
        typer.Option(help="write the loss per optimiser step as TensorBoard event files here"),
    ] = None,
    runs: Annotated[
        str,
        typer.Option(
            help="train only on successes of these runs (run ids, comma-separated); other runs' "
            "successes are read and skipped (default: every run)"
        ),
    ] = "",
) -> None:
    """Train the policy on webgym.trajectories.success and publish versions while rollouts run.

    Filtered behaviour cloning: cross-entropy on the reply tokens of successful steps, exactly as
    the policy saw and said them. Every --publish-every optimiser steps it writes the weights and
    a manifest to MinIO (policies/<name>/v<N>/), announces them on webgym.policy.versions, and
    only then commits its offsets; killed at any point, it resumes from the last announced
    version. Ctrl-C publishes what is trained, then stops.
    """
    import logging
    import signal
    import threading

    from learner.loop import Learner, LearnerConfig, LearnerError
    from learner.trainer import TrainerConfig

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    settings = _settings()
    config = LearnerConfig(
        policy_name=policy_name,
        group_id=group,
        fresh_per_step=fresh_per_step,
        replay_per_step=replay_per_step,
        publish_every=publish_every,
        window=window,
        recency_half_life=half_life,
        max_staleness=max_staleness,
        keep_versions=keep_versions,
        idle_s=idle_s,
        exit_when_idle=exit_when_idle,
        seed=seed,
        tensorboard=str(tensorboard) if tensorboard else None,
        runs=tuple(r.strip() for r in runs.split(",") if r.strip()),
    )
    trainer_config = TrainerConfig(
        model=model,
        lora_rank=lora_rank,
        lora_alpha=lora_alpha,
        learning_rate=lr,
        device=device,
        gradient_checkpointing=gradient_checkpointing,
    )
    if not _checkpoint_exists(model):
        raise SettingsError(
            f"--model {model}: no such checkpoint directory (nor a model id in the local Hugging "
            "Face cache); build a small one with `webgym model tiny DIR`"
        )
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        worker = Learner(settings, config, trainer_config)
    except (LearnerError, OSError, ValueError) as exc:
        raise SettingsError(f"cannot start the learner: {exc}") from exc
    console.print(
        f"learner for policy [bold]{policy_name}[/] from {model} "
        f"({'LoRA rank ' + str(lora_rank) if lora_rank else 'full fine-tuning'}, {device}) "
        f"on {settings.topic('trajectories.success')}. Ctrl-C to stop."
    )
    try:
        worker.run(stop)
    except LearnerError as exc:
        raise SettingsError(str(exc)) from exc
    finally:
        worker.close()
    console.print(
        f"stopped: {worker.stats['optimizer_steps']} optimiser steps, "
        f"{worker.stats['samples_trained']} samples trained, "
        f"published {[f'v{v}' for v, _, _ in worker.stats['published']]}"
    )


@policy_app.command("versions")
@user_errors
def policy_versions(
    policy_name: Annotated[str, typer.Option(help="the policy")] = "default",
) -> None:
    """List the stored versions of a policy: samples seen, optimiser steps, last loss, origin."""
    from infra.objects import build_minio
    from infra.weights import latest_announced, read_manifest, stored_versions

    settings = _settings()
    client = build_minio(settings)
    latest = latest_announced(settings, policy_name)
    serving = latest["policy_version"] if latest else 0
    stored = stored_versions(client, settings, policy_name)
    if latest is None and not stored:
        known = sorted(
            item.object_name.split("/")[1]
            for item in client.list_objects(settings.policies_bucket, prefix="policies/")
            if item.is_dir
        )
        raise WeightsRejected(
            f"no policy named {policy_name!r}: no version of it is stored in "
            f"{settings.policies_bucket} or announced on {settings.topic('policy.versions')}. "
            f"Stored policies: {', '.join(known) or 'none'}; pick one with --policy-name, or "
            "train one with `webgym learner`"
        )
    table = Table("version", "samples seen", "optimiser steps", "last loss", "origin", "files")
    for version in stored:
        try:
            manifest = read_manifest(client, settings, policy_name, version)
        except WeightsRejected:
            table.add_row(f"v{version}", "-", "-", "-", "incomplete upload (never announced)", "-")
            continue
        training = manifest.training
        origin = (
            f"rollback to v{training['rollback_of']}"
            if "rollback_of" in training
            else f"trained from v{manifest.parent_version or 0}"
        )
        losses = training.get("losses") or []
        table.add_row(
            f"v{version}" + (" (latest)" if version == serving else ""),
            str(manifest.samples_seen),
            str(training.get("optimizer_steps", "-")),
            f"{losses[-1]:.4f}" if losses else "-",
            origin,
            str(len(manifest.files)),
        )
    console.print(table)
    if latest is None:
        console.print(f"no version of {policy_name} is announced yet; start `webgym learner`")


@policy_app.command("rollback")
@user_errors
def policy_rollback(
    version: Annotated[int, typer.Argument(help="the stored version to serve again")],
    policy_name: Annotated[str, typer.Option(help="the policy")] = "default",
) -> None:
    """Serve an older version again, published as the next version (versions only go up).

    Policy workers swap it in like any new version; a running learner sees a newer version than
    its own and resumes from it (its unpublished steps are dropped).
    """
    from infra.objects import build_minio
    from infra.producer import EventProducer
    from infra.weights import rollback

    settings = _settings()
    producer = EventProducer.connect(settings, "webgym-policy-rollback")
    event = rollback(build_minio(settings), settings, producer, policy_name, version)
    console.print(
        f"{policy_name} v{event['policy_version']} now serves the weights of v{version} "
        f"({event['location']})"
    )


@bench_app.command("rollout")
@user_errors
def bench_rollout(
    episodes: Annotated[int, typer.Option(min=1, help="episodes of each asynchronous phase")] = 96,
    sync_batches: Annotated[int, typer.Option(min=1, help="synchronous batches to run")] = 2,
    in_flight: Annotated[int, typer.Option(min=1, help="episodes in flight (= batch size)")] = 32,
    median: Annotated[float, typer.Option(min=0.0, help="inference time median, seconds")] = 1.5,
    sigma: Annotated[float, typer.Option(min=0.0, help="inference time lognormal sigma")] = 0.7,
    partitions: Annotated[int, typer.Option(min=1, help="partitions of the episode topics")] = 8,
    sites: Annotated[int, typer.Option(min=1, help="practice-web sites")] = 10,
    seed: Annotated[int, typer.Option(help="workload and practice-web seed")] = 0,
    scaling: Annotated[
        bool,
        typer.Option(
            help="also the instant-policy pipeline over 1/2/4 browser workers "
            "and 8/16/32 partitions (several more minutes)"
        ),
    ] = False,
) -> None:
    """Asynchronous against synchronous rollouts through the whole pipeline, in one run.

    Runs the latency-model policy (lognormal VLM-like inference time, episodes answering at a
    drawn step within their horizon) with --in-flight episodes asynchronously, then in lock-step
    batches, then with an instant policy, then the same browser work in a bare Playwright loop;
    sets each against a zero-overhead simulation over the same episodes. Writes
    bench/results/rollout.json and rollout.png. Needs the local stack (`webgym up`); takes
    several minutes with the defaults.
    """
    from bench.rollout import main as rollout

    argv = [
        "--episodes", str(episodes), "--sync-batches", str(sync_batches),
        "--in-flight", str(in_flight), "--median", str(median), "--sigma", str(sigma),
        "--partitions", str(partitions), "--sites", str(sites), "--seed", str(seed),
    ]  # fmt: skip
    rollout(argv + (["--scaling"] if scaling else []))


@model_app.command("tiny")
@user_errors
def model_tiny(
    out: Annotated[Path, typer.Argument(help="directory to write the checkpoint to")],
    seed: Annotated[int, typer.Option(help="weights and tokenizer seed")] = 0,
) -> None:
    """Build a tiny randomly initialised Qwen-VL checkpoint offline (for tests and smoke runs)."""
    from agents.policy.tiny_model import build_tiny_vl_model

    if out.exists() and not out.is_dir():
        raise SettingsError(f"{out} is a file, not a directory; give a directory to write to")
    path = build_tiny_vl_model(out, seed=seed)
    console.print(f"tiny Qwen-VL checkpoint written to {path}")


# Views of the log (analytics/): each command lives with its view; light imports only.
app.command("replay")(user_errors(replay_cli.replay))
app.command("rescore")(user_errors(rescore_cli.rescore))
app.command("stats")(user_errors(stats_cli.stats))
app.command("dashboard")(user_errors(dashboard_cli.dashboard))
app.command("check")(user_errors(check_cli.check))


def main() -> None:
    app()


if __name__ == "__main__":
    main()
