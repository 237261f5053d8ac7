"""``webgym experiment learn``: does the loop learn? Warm start, on-policy training and
evaluation of every published version, all through Kafka, in one command.

Every step is the pipeline a user runs, only the behaviour policy changes (the recipe:
:func:`run_learning`). Evaluation episodes are marked ``purpose="eval"``: the success filter and
the learner refuse them, so no held-out instance is ever trained on. The results:
``learning.json`` (see :func:`result`), ``learning.png``, and with ``tensorboard`` the learner's
loss and the held-out curve as TensorBoard event files.
"""

from __future__ import annotations

import statistics
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from analytics.evaluation import interval
from commands.eval_run import EvalOptions, Evaluator
from commands.local_run import LocalLoop, RunFailed, RunFollower, RunOptions
from infra.minio_store import build_minio
from infra.producer import now_ms
from infra.settings import Settings
from infra.tensorboard import ScalarLog
from infra.weights import WeightsRejected, announced_versions, read_manifest
from streams.filters import is_success
from streams.targets import send_stop, start_sampling
from tasks import miniwob

PAGES = miniwob.CLICK_AND_TYPE
WARM_START, ON_POLICY = "warm_start", "on_policy"


@dataclass(frozen=True)
class LearnOptions:
    pages: tuple[str, ...] = PAGES
    train_seeds: int = 80  # training instances per page
    heldout_seeds: int = 10  # held-out instances per page (pages x seeds episodes per version)
    # MiniWoB++ episodes through the pipeline run at 0.3 to 1.1 a second on 2 cores (a fresh
    # browser context and page load each): these budgets keep the whole run within 13 to 30
    # minutes (bench/results/learning.json).
    warm_start_episodes: int = 120  # the warm start's budget: teacher episodes
    on_policy_episodes: int = 160  # 0: stop after the warm start
    in_flight: int = 8
    eval_in_flight: int = 8
    temperature: float = 0.7  # the model's sampling on its training rollouts (eval is greedy)
    max_new_tokens: int = 48  # the teacher's replies are about 36 tokens
    # Unparseable replies an episode tolerates before it ends (the stack's default is 3): a
    # random base model's episodes end sooner, and so do their evaluations.
    parse_error_budget: int = 1
    learning_rate: float = 1e-3
    fresh_per_step: int = 2  # new samples per optimiser step
    replay_per_step: int = 14  # window samples per optimiser step
    publish_every: int = 36  # optimiser steps per version
    learner_idle_s: float = 10.0
    model: str | None = None  # base checkpoint; None: a fresh `webgym model tiny`
    tensorboard: str | None = None
    seed: int = 0
    experiment_id: str = ""


@dataclass
class Timeline:
    started: float = field(default_factory=time.time)
    marks: dict[str, float] = field(default_factory=dict)

    def mark(self, name: str) -> None:
        self.marks[name] = round(time.time() - self.started, 1)

    def since_start(self, ts_ms: int | None) -> float | None:
        return None if ts_ms is None else round(ts_ms / 1000 - self.started, 1)


class TrainingRun:
    """One training phase's run, followed in a thread: its scored episodes and their versions."""

    def __init__(self, settings: Settings, run_id: str, check: Callable[[], None]):
        self.run_id, self._check = run_id, check
        self.scored: list[dict[str, Any]] = []
        self.ended = 0
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._follower = RunFollower(settings, run_id, now_ms() - 1000, self._on_event)
        self._thread = threading.Thread(target=self._follow, name=f"follow {run_id}", daemon=True)
        self._thread.start()

    def _on_event(self, event_type: str, record: dict[str, Any]) -> None:
        if event_type == "scored_trajectory":
            self.scored.append(record)
        elif record["kind"] != "started":
            self.ended += 1

    def _follow(self) -> None:
        try:
            while not self._stop.is_set():
                self._follower.poll(0.5)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the main thread by wait()
            self._error = exc

    def judged(self) -> int:
        if self._error is not None:
            raise RunFailed(f"following {self.run_id} failed: {self._error}")
        return len(self.scored)

    def wait(self, episodes: int, stall_s: float = 300.0) -> None:
        last, seen = time.monotonic(), -1
        while self.judged() < episodes:
            self._check()
            if self.judged() != seen:
                last, seen = time.monotonic(), self.judged()
            elif time.monotonic() - last > stall_s:
                raise RunFailed(f"{self.run_id}: no episode judged for {stall_s:.0f} s")
            time.sleep(0.5)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self._follower.close()

    def success(self) -> dict[str, Any]:
        wins = sum(is_success(r) for r in self.scored)
        low, high = interval(wins, len(self.scored))
        return {
            "episodes": len(self.scored),
            "success": round(wins / len(self.scored), 4) if self.scored else None,
            "ci_low": round(low, 4),
            "ci_high": round(high, 4),
        }


def run_learning(
    settings: Settings, options: LearnOptions, report: Callable[[str], None] = print
) -> dict[str, Any]:
    """The whole experiment; returns what ``learning.json`` holds.

    The recipe (every step is the pipeline a user runs, only the behaviour policy changes):

    1. publish the experiment's own task sets, ``experiments/<id>/train`` and ``.../heldout``:
       seeded MiniWoB++ instances of ``pages``, disjoint seeds (a used stack's other sets never
       mix in); start a browser worker, the stream processors and the learner (full fine-tuning
       of the base checkpoint, its own policy name ``<id>``, so no earlier run's versions are
       resumed);
    2. evaluate the base model (v0) on the held-out set, greedy: the initial success;
    3. **warm start**: the teacher (the heuristic set-of-marks policy, which uses no weights)
       plays ``warm_start_episodes`` training instances (phase ``warm_start``); the learner
       trains on its successes as they arrive and publishes versions; the phase ends when the
       learner has trained every warm-start sample it can and published;
    4. the policy worker becomes the model itself (following the newest version, sampling at
       ``temperature``); every warm-start version is evaluated, pinned and greedy;
    5. **on-policy**: the model plays ``on_policy_episodes`` training instances (phase
       ``on_policy``); the learner keeps training on the model's own successes with no barrier,
       and each version it publishes is evaluated as soon as it is announced, while rollouts go
       on;
    6. the results: ``learning.json`` (see :func:`result`), ``learning.png``, and with
       ``tensorboard`` the learner's loss and the held-out curve as TensorBoard event files.
    """

    timeline = Timeline()
    settings = settings.model_copy(update={"parse_error_budget": options.parse_error_budget})
    stamp = f"{time.strftime('%Y%m%d%H%M%S')}{uuid.uuid4().hex[:4]}"
    experiment_id = options.experiment_id or f"learn{stamp}"
    policy_name = experiment_id
    prefix = f"experiments/{experiment_id}"
    train_set, heldout_set = f"{prefix}/train", f"{prefix}/heldout"
    work = settings.state_dir / "experiments" / experiment_id
    model = options.model
    if model is None:
        report("building the tiny Qwen-VL base model...")
        from agents.policy.tiny_model import build_tiny_vl_model  # transformers: only to build

        model = str(build_tiny_vl_model(work / "model"))
    tasks = miniwob.instance_sets(options.pages, options.train_seeds, options.heldout_seeds, prefix)
    scalars = ScalarLog(Path(options.tensorboard) / "eval" if options.tensorboard else None)
    learner_args = [
        "--policy-name", policy_name,
        "--lora-rank", "0",
        "--lr", str(options.learning_rate),
        "--fresh-per-step", str(options.fresh_per_step),
        "--replay-per-step", str(options.replay_per_step),
        "--publish-every", str(options.publish_every),
        "--idle-s", str(options.learner_idle_s),
        "--keep-versions", "10000",
        "--seed", str(options.seed),
        # Its own group, and only this experiment's rollouts: successes that earlier runs left
        # on the stack's success stream are never trained on.
        "--group", f"webgym-learner-{experiment_id}",
        "--runs", f"{experiment_id}-warm,{experiment_id}-on",
    ]  # fmt: skip
    if options.tensorboard:
        learner_args += ["--tensorboard", str(Path(options.tensorboard) / "learner")]
    model_policy = (
        "--model", model,
        "--policy-name", policy_name,
        "--temperature", str(options.temperature),
        "--max-new-tokens", str(options.max_new_tokens),
    )  # fmt: skip
    run_options = RunOptions(
        task_set=train_set,
        tasks=tuple(tasks),
        policy="local",
        policy_args=model_policy,
        run_id=experiment_id,
        learner_model=model,
        learner_args=tuple(learner_args),
    )
    versions: list[dict[str, Any]] = []
    phases: dict[str, Any] = {}
    with LocalLoop(settings, run_options, report) as loop:
        settings = loop.settings
        evaluator = Evaluator(
            settings,
            EvalOptions(
                task_set=heldout_set,
                in_flight=options.eval_in_flight,
                policy_name=policy_name,
                eval_id=f"{experiment_id}-eval",
            ),
            check=loop.check,
        )

        def evaluate(version: int, announced: dict[str, Any] | None, phase: str) -> None:
            report(f"evaluating v{version} on {evaluator.episodes_per_version} held-out episodes")
            result = evaluator.evaluate(version, announced)
            row = version_row(result, phase, timeline, loop.settings, policy_name)
            versions.append(row)
            scalars.scalar("heldout/success", row["heldout_success"], version)
            scalars.flush()
            report(
                f"v{version} ({phase}): held-out success {row['heldout_success']:.0%} "
                f"[{row['ci_low']:.0%}, {row['ci_high']:.0%}]"
            )

        @contextmanager
        def training_run(name: str, phase: str, episodes: int, seed: int) -> Iterator[TrainingRun]:
            """Run ``<experiment id>-<name>`` samples ``episodes`` training instances while the
            block runs; its sampling is stopped when the block ends, however it ends."""
            run = TrainingRun(settings, f"{experiment_id}-{name}", loop.check)
            start_sampling(
                settings,
                run.run_id,
                {train_set: 1.0},
                options.in_flight,
                episodes,
                seed=seed,
                phase=phase,
                check=False,
            )
            try:
                yield run
            finally:
                send_stop(settings, run.run_id)
                run.close()

        evaluate(0, None, "initial")
        timeline.mark("initial_evaluated")

        # -- warm start: the teacher plays, the learner clones its successes ----------------
        report("warm start: the heuristic teacher plays the training instances")
        loop.start_policy("heuristic")
        with training_run("warm", WARM_START, options.warm_start_episodes, options.seed) as warm:
            warm.wait(options.warm_start_episodes)
        timeline.mark("warm_start_rollouts_done")
        expected = trainable_steps(warm.scored)
        report(f"warm start: {expected} teacher samples; waiting for the learner to train them")
        learned = wait_for_learner(settings, policy_name, expected, options, loop.check)
        timeline.mark("warm_start_trained")
        phases[WARM_START] = {"rollouts": warm.success(), "samples": expected}

        # -- the model plays from now on; evaluate the warm-start versions ------------------
        report("the policy worker now serves the model itself")
        loop.start_policy("local", model_policy)
        for version in sorted(learned):
            evaluate(version, learned[version], WARM_START)
        timeline.mark("warm_start_evaluated")

        if options.on_policy_episodes == 0:  # a warm start alone (the CI-sized test)
            timeline.mark("done")
            scalars.close()
            return result(options, experiment_id, tasks, versions, phases, timeline)

        # -- on-policy: the model's own successes, evaluated as versions appear --------------
        report("on-policy: the model plays; the learner trains on its successes")
        last_warm = max(learned) if learned else 0
        evaluated = set(learned) | {0}
        with training_run("on", ON_POLICY, options.on_policy_episodes, options.seed + 1) as on:
            while on.judged() < options.on_policy_episodes:
                fresh = _newer(settings, policy_name, evaluated)
                if not fresh:
                    loop.check()
                    time.sleep(2)
                    continue
                version = min(fresh)
                evaluated.add(version)
                evaluate(version, fresh[version], ON_POLICY)
        timeline.mark("on_policy_rollouts_done")
        expected_on = trainable_steps(on.scored)
        report(f"on-policy: {expected_on} samples of the model's own; the learner finishes")
        done = wait_for_learner(settings, policy_name, expected + expected_on, options, loop.check)
        for version in sorted(set(done) - evaluated):
            evaluated.add(version)
            evaluate(version, done[version], ON_POLICY)
        timeline.mark("done")
        phases[ON_POLICY] = {
            "rollouts": on.success(),
            "samples": expected_on,
            "staleness": staleness(on.scored, done),
            "from_version": last_warm,
        }
    scalars.close()
    return result(options, experiment_id, tasks, versions, phases, timeline)


def trainable_steps(scored: list[dict[str, Any]]) -> int:
    """Samples the learner gets from these episodes: the trainable steps of the successes."""
    return sum(
        sum(1 for step in record["steps"] if step.get("trainable"))
        for record in scored
        if is_success(record) and record.get("purpose", "train") != "eval"
    )


def wait_for_learner(
    settings: Settings,
    policy_name: str,
    samples: int,
    options: LearnOptions,
    check: Callable[[], None],
) -> dict[int, dict[str, Any]]:
    """The announced versions, once one records ``samples`` samples seen, or once no version
    was announced for ten minutes (samples it dropped as stale or unreadable never count; a
    learner that is still working through its backlog publishes every ``publish_every`` steps,
    and what is left once its input has been quiet for its idle time)."""
    quiet_s = 600.0 + options.learner_idle_s
    last_change, last = time.monotonic(), None
    while True:
        check()
        announced = announced_versions(settings, policy_name)
        newest = max(announced) if announced else None
        if newest is not None and announced[newest]["samples_seen"] >= samples:
            return announced
        if newest != last:
            last_change, last = time.monotonic(), newest
        elif time.monotonic() - last_change > quiet_s:
            return announced
        time.sleep(2)


def _newer(settings: Settings, policy_name: str, seen: set[int]) -> dict[int, dict[str, Any]]:
    return {v: e for v, e in announced_versions(settings, policy_name).items() if v not in seen}


def version_row(
    result: dict[str, Any],
    phase: str,
    timeline: Timeline,
    settings: Settings,
    policy_name: str,
) -> dict[str, Any]:
    """One entry of ``learning.json``'s ``versions`` (the training record from its manifest)."""
    version = result["policy_version"]
    by_phase: dict[str, int] = {}
    if version > 0:
        try:
            manifest = read_manifest(build_minio(settings), settings, policy_name, version)
            by_phase = manifest.training.get("trained_by_phase", {})
        except WeightsRejected:
            by_phase = {}
        # A version is on-policy once it trained any of the model's own samples (the manifest
        # counts what each version trained since the one before).
        phase = ON_POLICY if by_phase.get(ON_POLICY) else WARM_START if by_phase else phase
    return {
        "version": version,
        "phase": phase,
        "wall_s": timeline.since_start(result.get("announced_ts")) if version else 0.0,
        "evaluated_at_s": round(time.time() - timeline.started, 1),
        "heldout_episodes": result["episodes"],
        "heldout_success": round(result["successes"] / max(result["episodes"], 1), 4),
        "ci_low": result["ci_low"],
        "ci_high": result["ci_high"],
        "samples_trained": result.get("samples_seen") or 0,
        "samples_since_previous_by_phase": by_phase,
        "by_task": {
            row["task"]: round(row["successes"] / max(row["episodes"], 1), 4)
            for row in result["by_task"]
        },
    }


def staleness(scored: list[dict[str, Any]], announced: dict[int, dict[str, Any]]) -> dict:
    """Per on-policy episode: versions announced before it ended that are newer than the newest
    version that served it (0: fresh), median and max."""
    lags = []
    for record in scored:
        served = [v for v in record.get("policy_versions") or [] if v is not None]
        if not served:
            continue
        ended = record.get("ts") or 0
        newest = max((v for v, e in announced.items() if e["ts"] <= ended), default=0)
        lags.append(max(0, newest - max(served)))
    if not lags:
        return {"episodes": 0}
    return {"episodes": len(lags), "median": statistics.median(lags), "max": max(lags)}


def result(
    options: LearnOptions,
    experiment_id: str,
    tasks: list[dict[str, Any]],
    versions: list[dict[str, Any]],
    phases: dict[str, Any],
    timeline: Timeline,
) -> dict[str, Any]:
    heldout = sorted(t["task_id"] for t in tasks if t["task_set"].endswith("/heldout"))
    initial = next((v for v in versions if v["version"] == 0), None)
    warm = [v for v in versions if v["phase"] == WARM_START]
    on = [v for v in versions if v["phase"] == ON_POLICY]
    best_warm = max((v["heldout_success"] for v in warm), default=None)
    best_on = max((v["heldout_success"] for v in on), default=None)
    flattened = None
    if len(warm) >= 2:
        a, b = warm[-2], warm[-1]
        flattened = a["ci_low"] <= b["ci_high"] and b["ci_low"] <= a["ci_high"]
    return {
        "experiment_id": experiment_id,
        "tasks": heldout,
        "pages": list(options.pages),
        "wall_clock_s": round(time.time() - timeline.started, 1),
        "initial_success": initial["heldout_success"] if initial else None,
        "final_success": versions[-1]["heldout_success"] if versions else None,
        "best_warm_start_success": best_warm,
        "best_on_policy_success": best_on,
        "on_policy_gain_points": (
            round(100 * (best_on - best_warm), 1)
            if best_on is not None and best_warm is not None
            else None
        ),
        "warm_start_flattened": flattened,
        "versions": versions,
        "phases": phases,
        "timeline_s": timeline.marks,
        "options": asdict(options),
    }
