"""``webgym run``: the whole rollout loop on one machine, on the practice web.

Reads like a recipe: bring the stack up, create the topics, publish the built-in task sets the run
names, check that every set it names exists on the tasks topic, serve the practice web, start one
browser worker, one policy worker and one Faust worker (as child processes, the way a user would
start them), tell the sampler the run's target (its task sets, episodes in flight, budget), follow
the episodes on Kafka until the requested number has been judged, then stop the run's sampling
(also when the run fails or is interrupted), stop the workers and summarise. Every figure in the
summary is computed from the events of this run.

The run draws only from the sets it names (``streams.curriculum``): tasks of other sets on the
same topic, and other runs sampling at the same time on the same stack, never reach it.
"""

from __future__ import annotations

import errno
import itertools
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import TopicPartition

from commands import run_logs
from commands.children import CLI, WORKER_CLI, Child, RunFailed, faust_argv, settings_env
from infra import stack
from infra.consumer import EventConsumer, build_consumer
from infra.dead_letters import DeadLetterRouter
from infra.ports import port_holder
from infra.producer import EventProducer, now_ms
from infra.settings import Settings
from infra.topic_admin import create_topics, require_partition_counts
from sites import generate_sites
from sites.server import PracticeWebServer
from sites.tasks import task_set_name
from streams.filters import is_success
from streams.targets import send_stop, start_sampling
from tasks import miniwob
from tasks.practice_web import practice_web_seed, practice_web_tasks
from tasks.publish import read_published_tasks
from tasks.sets import TaskSetError, check_known, is_member, parse_weights, set_sizes


@dataclass(frozen=True)
class RunOptions:
    episodes: int = 60
    in_flight: int = 8
    policy: str = "scripted"  # any `webgym worker policy --backend`
    policy_args: tuple[str, ...] = ()
    error_rate: float = 0.3  # scripted policy
    sites: int = 50
    seed: int = 0
    difficulty_ratios: dict[str, float] = field(default_factory=dict)
    stall_timeout_s: float = 180.0  # no episode ended for this long: the run failed
    # The task sets the run draws from: NAME[=WEIGHT],... (tasks.sets), or "practice-web" (the
    # practice web of `seed`) or "miniwob" (miniwob/train). Built-in sets it names are published
    # first (practice-web/seed-<K>[/train|/test] of `sites` sites; miniwob/train and
    # miniwob/heldout: `miniwob_seeds` instances of each of `miniwob_pages`); any other set must
    # be on the tasks topic already.
    task_set: str = "practice-web"
    miniwob_seeds: int = miniwob.DEFAULT_SEEDS
    miniwob_pages: tuple[str, ...] = miniwob.MARKS_SOLVABLE
    # Tasks to publish instead of the built-in sets' (tests: pages that fail on purpose); a task
    # without a set joins the run's only set.
    tasks: tuple[dict[str, Any], ...] = ()
    run_id: str = ""
    # Also run `webgym learner --model <learner_model> <learner_args>` (None: no learner).
    learner_model: str | None = None
    learner_args: tuple[str, ...] = ()
    browser_workers: int = 1  # browser worker processes (one consumer group)
    browser_args: tuple[str, ...] = ()  # more `webgym worker browser` options
    # Synchronous batches (benchmarks): start this many episodes, wait until every one of them
    # ended and was judged, then start the next batch (run ids <run_id>-b000, -b001, ...).
    sync_batch: int | None = None


@dataclass
class RunSummary:
    run_id: str
    started: int = 0
    ended: int = 0
    finished: int = 0
    aborted: int = 0
    judged: int = 0
    successes: int = 0
    steps: int = 0
    repeated_steps: int = 0
    wall_s: float = 0.0
    terminations: Counter = field(default_factory=Counter)
    judge_errors: int = 0
    episodes: dict[str, dict[str, Any]] = field(default_factory=dict)  # episode_id -> scored

    @property
    def success_rate(self) -> float:
        return self.successes / self.judged if self.judged else 0.0

    @property
    def steps_per_s(self) -> float:
        return self.steps / self.wall_s if self.wall_s else 0.0

    @property
    def episodes_per_hour(self) -> float:
        return self.ended * 3600 / self.wall_s if self.wall_s else 0.0

    @property
    def repetition_share(self) -> float:
        return self.repeated_steps / self.steps if self.steps else 0.0

    def figures(self) -> dict[str, Any]:
        """The summary as plain numbers (``--summary-json``)."""
        return {
            "run_id": self.run_id,
            "episodes_started": self.started,
            "episodes_ended": self.ended,
            "finished": self.finished,
            "aborted": self.aborted,
            "judged": self.judged,
            "successes": self.successes,
            "success_rate": round(self.success_rate, 4),
            "judge_errors": self.judge_errors,
            "steps": self.steps,
            "repeated_steps": self.repeated_steps,
            "repetition_share": round(self.repetition_share, 4),
            "wall_s": round(self.wall_s, 2),
            "steps_per_s": round(self.steps_per_s, 3),
            "episodes_per_hour": round(self.episodes_per_hour, 1),
            "terminations": dict(self.terminations),
        }


def publish_tasks(settings: Settings, tasks: list[dict[str, Any]]) -> None:
    producer = EventProducer.connect(settings, "webgym-run-tasks")
    for task in tasks:
        producer.produce(settings.topic("tasks"), task["task_id"], "task", task)
    producer.flush()


def _batches(run_id: str, options: RunOptions) -> Iterator[tuple[str, int, int, int]]:
    """(run id, in flight, episode budget, episodes ended when it is done) of each target the
    run sends: one asynchronous target for the whole run, or one per synchronous batch."""
    if not options.sync_batch:
        yield run_id, options.in_flight, options.episodes, options.episodes
        return
    started = 0
    for number in itertools.count():
        size = min(options.sync_batch, options.episodes - started)
        started += size
        yield f"{run_id}-b{number:03d}", size, size, started


def task_set_weights(options: RunOptions) -> dict[str, float]:
    """The sets the run draws from, with their weights (``RunOptions.task_set``)."""
    aliases = {"practice-web": task_set_name(options.seed), "miniwob": miniwob.TRAIN_SET}
    return parse_weights(aliases.get(options.task_set, options.task_set))


def builtin_tasks(options: RunOptions, names: list[str]) -> list[dict[str, Any]]:
    """The tasks to publish before the run: ``options.tasks`` if given (a task without a set
    joins the run's only set), else the tasks of the built-in sets among ``names``."""
    if options.tasks:
        if any(not task.get("task_set") for task in options.tasks) and len(names) != 1:
            raise TaskSetError(
                "RunOptions.tasks without a task_set need a run that names exactly one set"
            )
        return [{**task, "task_set": task.get("task_set") or names[0]} for task in options.tasks]
    tasks = []
    for seed in sorted({practice_web_seed(name) for name in names} - {None}):
        tasks += practice_web_tasks(seed=seed, count=options.sites)
    if miniwob.TRAIN_SET in names:
        tasks += miniwob.train_tasks(options.miniwob_pages, options.miniwob_seeds)
    if miniwob.HELDOUT_SET in names:
        tasks += miniwob.heldout_tasks(options.miniwob_pages, options.miniwob_seeds)
    return tasks


def practice_web_served(
    options: RunOptions, names: list[str], published: list[dict[str, Any]]
) -> tuple[int, int]:
    """(seed, site count) of the practice web to serve: every site of the run's practice-web set
    on the topic (an earlier run may have published more sites than ``options.sites``)."""
    seeds = {practice_web_seed(name) for name in names} - {None}
    if len(seeds) > 1:
        raise TaskSetError(
            f"one run serves the practice web of one seed; the sets name seeds {sorted(seeds)}"
        )
    seed = seeds.pop() if seeds else options.seed
    name = task_set_name(seed)
    websites = {task["website"] for task in published if is_member(task, name)}
    return seed, max(options.sites, len(websites))


def send_target(
    settings: Settings,
    run_id: str,
    in_flight: int,
    options: RunOptions,
    episodes: int | None,
    task_sets: dict[str, float] | None = None,
) -> None:
    """The run's target: ``in_flight`` episodes at once, at most ``episodes`` in all, drawn
    from ``task_sets`` (default: the options' sets)."""
    start_sampling(
        settings,
        run_id,
        task_sets if task_sets is not None else task_set_weights(options),
        in_flight,
        episodes,
        seed=options.seed,
        difficulty_ratios=options.difficulty_ratios,
        check=False,
    )


class RunFollower:
    """Follows one run's episodes and scores on Kafka (a fresh consumer, from a point in time)."""

    def __init__(
        self,
        settings: Settings,
        run_id: str,
        since_ms: int,
        on_event: Callable[[str, dict[str, Any]], None] | None = None,
    ):
        """``on_event(event_type, record)`` is called once per new episode or score of the
        run, after the summary counted it."""
        self.summary = RunSummary(run_id)
        self._on_event = on_event
        self._prefix = f"{run_id}-"
        topics = [settings.topic("episodes"), settings.topic("trajectories.scored")]
        consumer = build_consumer(settings, f"webgym-run-{run_id}", "webgym-run-follower")
        wanted = []
        for topic in topics:
            partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
            wanted += [TopicPartition(topic, p, since_ms) for p in partitions]
        consumer.assign(consumer.offsets_for_times(wanted, timeout=10))
        self._consumer = EventConsumer(
            consumer, DeadLetterRouter(settings, EventProducer.connect(settings, "webgym-run-dlq"))
        )
        self._seen: set[str] = set()
        self._first_ms: int | None = None
        self._last_ms: int | None = None

    def poll(self, timeout_s: float = 0.5) -> None:
        event = self._consumer.poll(timeout_s)
        if event is None:
            return
        record, summary = event.record, self.summary
        episode_id = record.get("episode_id", "")
        if not episode_id.startswith(self._prefix) or record["event_id"] in self._seen:
            return
        self._seen.add(record["event_id"])
        if event.event_type == "episode":
            if record["kind"] == "started":
                summary.started += 1
                self._first_ms = min(self._first_ms or record["ts"], record["ts"])
            else:
                summary.ended += 1
                summary.finished += record["kind"] == "finished"
                summary.aborted += record["kind"] == "aborted"
                summary.terminations[(record["reason"] or "").split(":")[0]] += 1
                self._last_ms = max(self._last_ms or record["ts"], record["ts"])
        elif event.event_type == "scored_trajectory":
            summary.judged += 1
            summary.successes += is_success(record)
            summary.judge_errors += record.get("judge_error") is not None
            summary.steps += len(record["steps"])
            summary.repeated_steps += sum(1 for s in record["steps"] if s["repeated"])
            summary.episodes[episode_id] = record
        if self._first_ms and self._last_ms:
            summary.wall_s = (self._last_ms - self._first_ms) / 1000
        if self._on_event is not None:
            self._on_event(event.event_type, record)

    def until_done(self, episodes: int, stall_timeout_s: float, hint: str) -> Iterator[RunSummary]:
        """Poll until ``episodes`` episodes ended and were judged, yielding the summary before
        each poll (so never once they are). Raises :class:`RunFailed` (ending with ``hint``)
        when none ended or was judged for ``stall_timeout_s``."""
        summary = self.summary
        seen, last_progress = (summary.ended, summary.judged), time.monotonic()
        while summary.judged < episodes or summary.ended < episodes:
            yield summary
            self.poll(0.5)
            if (summary.ended, summary.judged) != seen:
                seen, last_progress = (summary.ended, summary.judged), time.monotonic()
            elif time.monotonic() - last_progress > stall_timeout_s:
                raise RunFailed(
                    f"no episode of run {summary.run_id} ended or was judged for "
                    f"{stall_timeout_s:.0f} s ({summary.ended} ended, {summary.judged} judged); "
                    f"{hint}"
                )

    def close(self) -> None:
        self._consumer.close()


def serve_pages(sites: list, address: str, report: Callable[[str], None]) -> PracticeWebServer:
    """The practice web and the MiniWoB++ pages on ``address`` (host:port); when that port is
    taken, on a free one instead, said in one line naming the holder. The run's workers are
    told the address actually served."""
    host, _, port = address.rpartition(":")
    host = host or "127.0.0.1"
    static = {miniwob.HOST: miniwob.html_root()}
    try:
        return PracticeWebServer(sites, host=host, port=int(port), static_hosts=static)
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
    server = PracticeWebServer(sites, host=host, port=0, static_hosts=static)
    holder = port_holder(int(port))
    report(
        f"port {port} is taken{f' by {holder}' if holder else ''}: serving the pages on "
        f"{host}:{server.port} instead (WEBGYM_PRACTICE_WEB_ADDRESS picks the address)"
    )
    return server


class LocalLoop:
    """The workers of one run on this machine, as child processes: the practice web served, one
    browser worker (or ``options.browser_workers``), one policy worker, one Faust worker and, with
    ``options.learner_model``, the learner; each logs to ``<logs_dir>/<run_id>/<name>.log``
    (entering removes all but the ``settings.run_logs_kept`` last written earlier runs' logs).

    A context manager. Entering brings the stack up (``start_stack``), creates the topics,
    publishes the built-in task sets the options name, checks that every set exists on the tasks
    topic, serves the practice web and starts the workers, returning when each is ready (or
    raising :class:`RunFailed` naming its log). Leaving stops them all, newest first, and the web
    server, whatever ended the block. ``settings`` is the settings the children run with (the
    web server's real port); ``children`` maps each worker's name to its :class:`Child`.
    """

    def __init__(
        self,
        settings: Settings,
        options: RunOptions,
        report: Callable[[str], None] = lambda _: None,
        start_stack: bool = True,
    ):
        self.options = options
        self.report = report
        self.run_id = options.run_id or (
            f"run{time.strftime('%Y%m%d%H%M%S')}{uuid.uuid4().hex[:4]}"
        )
        self.weights = task_set_weights(options)  # a bad set is refused before anything starts
        self.settings = settings
        self.children: dict[str, Child] = {}
        self.log_dir = settings.logs_dir / self.run_id
        self._start_stack = start_stack
        self._cleanup = ExitStack()
        self.sites_count = options.sites
        self.sites_seed = options.seed

    def __enter__(self) -> LocalLoop:
        try:
            self._start()
        except BaseException:
            self._cleanup.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._cleanup.close()

    def _start(self) -> None:

        settings, options, report = self.settings, self.options, self.report
        if self._start_stack:
            report("starting the local stack (Kafka, MinIO)...")
            stack.up(settings, report=report)
        report("creating topics...")
        require_partition_counts(settings, states=create_topics(settings))
        run_logs.keep_newest(settings.logs_dir, settings.run_logs_kept)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        tasks = builtin_tasks(options, list(self.weights))
        if tasks:
            report(f"publishing {len(tasks)} tasks to {settings.topic('tasks')}...")
            publish_tasks(settings, tasks)
        report(f"reading the task sets on {settings.topic('tasks')}...")
        published = read_published_tasks(settings)
        check_known(self.weights, set_sizes(published))
        self.sites_seed, self.sites_count = practice_web_served(
            options, list(self.weights), published
        )
        sites = generate_sites(seed=self.sites_seed, count=self.sites_count)
        report(f"serving {len(sites)} practice-web sites...")
        server = serve_pages(sites, settings.practice_web_address, report)
        self._cleanup.enter_context(server)
        self.settings = settings = settings.model_copy(
            update={"practice_web_address": f"{server.host}:{server.port}"}
        )
        self.env = settings_env(settings)
        self._cleanup.callback(self._stop_children)
        report("starting the browser worker...")
        for n in range(options.browser_workers):
            name = "browser worker" if n == 0 else f"browser worker {n + 1}"
            self.start_child(name, [*WORKER_CLI, "browser", *options.browser_args])
        report("starting the policy worker...")
        self.start_policy(options.policy, options.policy_args, wait=False)
        report("starting the stream processors (faust worker)...")
        self.start_child("stream processors", faust_argv(), log_name="streams")
        if options.learner_model:
            report("starting the learner...")
            learner = [*CLI, "learner", "--model", options.learner_model, *options.learner_args]
            self.start_child("learner", learner)
        for name, child in self.children.items():
            if name.startswith("browser worker"):
                child.wait_for("assigned", 120)
        self.children["policy worker"].wait_for("assigned", 180)
        self.children["stream processors"].wait_for("Ready", 120)
        if "learner" in self.children:
            self.children["learner"].wait_for("ready at v", 300)

    def start_child(self, name: str, argv: list[str], log_name: str | None = None) -> Child:
        """Start one more worker (its log: ``<log_name or name with dashes>.log``)."""
        child = Child.start(log_name or name.replace(" ", "-"), argv, self.env, self.log_dir)
        self.children[name] = child
        return child

    def start_policy(
        self, policy: str, policy_args: tuple[str, ...] | list[str] = (), wait: bool = True
    ) -> Child:
        """(Re)start the policy worker with another backend (any ``webgym worker policy
        --backend``); the one running is stopped first. With ``wait``, returns once it holds
        its partitions."""
        old = self.children.pop("policy worker", None)
        if old is not None:
            old.stop()
        args = list(policy_args)
        if policy == "scripted":
            args += [
                "--error-rate",
                str(self.options.error_rate),
                "--sites-count",
                str(self.sites_count),
                "--sites-seed",
                str(self.sites_seed),
            ]
        child = self.start_child(
            "policy worker", [*WORKER_CLI, "policy", "--backend", policy, *args]
        )
        if wait:
            child.wait_for("assigned", 180)
        return child

    def on_exit(self, callback: Callable[..., object], *args: object) -> None:
        """Call ``callback(*args)`` when the loop ends, before its workers stop."""
        self._cleanup.callback(callback, *args)

    def check(self) -> None:
        """Raise :class:`RunFailed` if a worker has died."""
        for child in self.children.values():
            child.check()

    def _stop_children(self) -> None:
        for child in reversed(list(self.children.values())):
            child.stop()


def run_local(
    settings: Settings,
    options: RunOptions,
    report: Callable[[str], None] = lambda _: None,
    on_progress: Callable[[RunSummary, dict[str, Child]], None] = lambda *_: None,
    start_stack: bool = True,
) -> RunSummary:
    """Run ``options.episodes`` episodes through the whole loop; see the module docstring."""
    with LocalLoop(settings, options, report, start_stack) as loop:
        settings, run_id, weights = loop.settings, loop.run_id, loop.weights
        since = now_ms() - 1000
        follower = RunFollower(settings, run_id, since)
        loop.on_exit(follower.close)
        report(
            f"run {run_id}: {options.episodes} episodes, {options.in_flight} in flight, "
            f"from {', '.join(weights)}"
        )
        batches = _batches(run_id, options)
        batch_run, in_flight, budget, batch_end = next(batches)
        # Whatever ends the run (done, a failed worker, Ctrl-C), its sampling ends with it.
        stopped = [batch_run]
        loop.on_exit(lambda: send_stop(settings, stopped[0]))
        send_target(settings, batch_run, in_flight, options, budget, weights)
        summary = follower.summary
        for _ in follower.until_done(
            options.episodes, options.stall_timeout_s, f"logs in {loop.log_dir}"
        ):
            if min(summary.judged, summary.ended) >= batch_end:
                batch_run, in_flight, budget, batch_end = next(batches)
                stopped[0] = batch_run
                send_target(settings, batch_run, in_flight, options, budget, weights)
            on_progress(summary, loop.children)
            loop.check()
        report("stopping the workers...")
    return summary
