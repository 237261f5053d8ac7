"""``webgym eval``: frozen policy versions measured on a held-out task set, through the pipeline.

Each version is one evaluation run on the sampler (``<eval_id>-v<N>``), marked ``purpose="eval"``
and pinned to the version (:class:`Evaluator`); each judged episode becomes an ``eval_result``
event on ``webgym.eval.results``, and a last one holds the version's success. Guarantees: a
version's result counts every episode of its run once; an evaluation that ends early (an error,
Ctrl-C) stops its run's sampling; a version whose weights the worker cannot serve raises
:class:`EvalFailed` naming it instead of reporting a 0%.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from confluent_kafka import TopicPartition

from analytics.evaluation import VersionTally
from commands.local_run import RunFollower
from infra.consumer import build_consumer
from infra.producer import EventProducer, now_ms
from infra.settings import Settings
from infra.weights import announced_versions
from schemas.serde import default_catalog
from streams.targets import send_stop, start_sampling
from tasks import miniwob
from tasks.publish import read_published_tasks
from tasks.sets import check_known, is_member, set_sizes

BACKEND_ERROR_MARK = "backend error"


class EvalFailed(RuntimeError):
    """An evaluation that cannot give a result (the message says why and what to do)."""


@dataclass(frozen=True)
class EvalOptions:
    task_set: str = miniwob.HELDOUT_SET
    per_task: int = 1  # episodes per held-out task and version
    in_flight: int = 8
    policy_name: str = "default"
    eval_id: str = ""
    phase: str | None = None  # a label on every episode (e.g. "warm_start")
    stall_timeout_s: float = 300.0  # no episode judged for this long: the evaluation failed


class Evaluator:
    """Evaluates versions one after another and publishes their results.

    Each version is one evaluation run on the sampler (``<eval_id>-v<N>``), marked
    ``purpose="eval"`` and pinned to the version: the sampler enumerates the held-out set (every
    task ``per_task`` times, the same instances for every version), the policy worker serves
    each request with exactly that version's weights and decodes greedily, and no episode of it
    can reach the learner (the success filter and the learner both refuse them). As its episodes
    are judged, each becomes an ``eval_result`` event on ``webgym.eval.results``; when all are
    judged, one more event holds the version's success with its 95% interval, overall and per
    task family.

    Needs running workers: a browser worker, the stream processors and a policy worker serving
    the policy with a model (``webgym worker policy --backend local --model DIR --policy-name
    NAME``), and the held-out pages served; ``webgym eval`` starts them itself unless
    ``--attach``.
    """

    def __init__(
        self,
        settings: Settings,
        options: EvalOptions,
        check: Callable[[], None] = lambda: None,
        report: Callable[[str], None] = lambda _: None,
    ):
        """``check`` is called while waiting (raise to abort: a local loop's dead worker)."""
        if options.per_task < 1 or options.in_flight < 1:
            raise EvalFailed("--per-task and --in-flight must be at least 1")
        self.settings, self.options, self.check, self.report = settings, options, check, report
        stamp = f"{time.strftime('%Y%m%d%H%M%S')}{uuid.uuid4().hex[:4]}"
        self.eval_id = options.eval_id or f"eval{stamp}"
        published = read_published_tasks(settings)
        check_known({options.task_set: 1.0}, set_sizes(published))
        self.tasks = sorted(t["task_id"] for t in published if is_member(t, options.task_set))
        self.producer = EventProducer.connect(settings, f"webgym-eval-{self.eval_id}")
        self.results: list[dict[str, Any]] = []

    @property
    def episodes_per_version(self) -> int:
        return len(self.tasks) * self.options.per_task

    def evaluate(
        self,
        version: int,
        announced: dict[str, Any] | None = None,
        on_episode: Callable[[dict[str, Any]], None] = lambda _: None,
    ) -> dict[str, Any]:
        """Run version ``version``'s evaluation to its end; its ``version`` result event.
        ``announced`` is the version's ``policy_version`` event (its time and samples seen go
        into the result)."""
        options, settings = self.options, self.settings
        run_id = f"{self.eval_id}-v{version}"
        tally = VersionTally(self.eval_id, options.policy_name, version, options.task_set)
        failures: list[str] = []
        topic = settings.topic("eval.results")

        def on_event(event_type: str, record: dict[str, Any]) -> None:
            if event_type == "episode" and record["kind"] != "started":
                failures.append(record.get("reason") or "")
            if event_type == "scored_trajectory":
                result = tally.add(record, now_ms())
                if result is not None:
                    self.producer.produce(topic, options.policy_name, "eval_result", result)
                    on_episode(result)

        follower = RunFollower(settings, run_id, now_ms() - 1000, on_event)
        budget = self.episodes_per_version
        try:
            start_sampling(
                settings,
                run_id,
                {options.task_set: 1.0},
                options.in_flight,
                budget,
                purpose="eval",
                pinned_version=version,
                phase=options.phase,
                check=False,
            )
            last, progress = time.monotonic(), 0
            while tally.episodes < budget:
                follower.poll(0.5)
                self.check()
                _refuse_unserved(version, options.policy_name, failures, options.in_flight)
                if tally.episodes != progress:
                    last, progress = time.monotonic(), tally.episodes
                elif time.monotonic() - last > options.stall_timeout_s:
                    raise EvalFailed(
                        f"no episode of {run_id} was judged for {options.stall_timeout_s:.0f} s "
                        f"({tally.episodes} of {budget}); are a browser worker, a policy worker "
                        f"serving policy {options.policy_name!r} with a model, and the stream "
                        "processors running? (`webgym eval` without --attach starts them)"
                    )
        finally:
            send_stop(settings, run_id)
            follower.close()
        result = tally.result(
            now_ms(),
            announced_ts=(announced or {}).get("ts"),
            samples_seen=(announced or {}).get("samples_seen"),
        )
        self.producer.produce(topic, options.policy_name, "eval_result", result)
        self.producer.flush()
        self.results.append(result)
        return result

    def follow(self, stop: Callable[[], bool], poll_s: float = 1.0) -> Iterator[dict[str, Any]]:
        """Each version of the policy announced from now on (and the newest one already
        announced), in order, as it comes; ends when ``stop()`` is true between versions."""
        seen: set[int] = set()
        reader = _versions_reader(self.settings, self.eval_id)  # first: nothing falls between
        announced = announced_versions(self.settings, self.options.policy_name)
        if announced:
            newest = max(announced)
            seen.update(v for v in announced if v != newest)
        try:
            while not stop():
                announced |= _read_announcements(reader, self.options.policy_name, poll_s)
                for version in sorted(set(announced) - seen):
                    seen.add(version)
                    yield announced[version]
        finally:
            reader.close()


def _refuse_unserved(version: int, policy: str, reasons: list[str], enough: int) -> None:
    """Every one of at least ``enough`` ended episodes aborted by the backend: the version is
    not being served (a missing announcement, weights or model); stop instead of scoring 0%."""
    if len(reasons) >= enough and all(BACKEND_ERROR_MARK in r for r in reasons):
        raise EvalFailed(
            f"policy {policy!r} v{version} was not served: the first {len(reasons)} episodes all "
            f"ended by backend errors (last: {reasons[-1][:300]}); check that the policy worker "
            f"serves policy {policy!r} with a model and that v{version} is announced "
            "(`webgym policy versions --policy-name NAME`)"
        )


def _versions_reader(settings: Settings, eval_id: str):
    """A reader of the versions topic from its end as of now (resolved now, not at the first
    fetch, so an announcement made while the topic's history is read is not missed)."""

    consumer = build_consumer(settings, f"webgym-eval-{eval_id}", f"webgym-eval-{eval_id}")
    partition = TopicPartition(settings.topic("policy.versions"), 0)
    _, high = consumer.get_watermark_offsets(partition, timeout=10)
    consumer.assign([TopicPartition(partition.topic, 0, high)])
    return consumer


def _read_announcements(consumer, policy_name: str, timeout_s: float) -> dict[int, dict]:
    catalog, found = default_catalog(), {}
    for message in consumer.consume(64, timeout=timeout_s):
        if message.error() or message.value() is None:
            continue
        try:
            decoded = catalog.decode(message.value(), "policy_version")
        except Exception:  # noqa: BLE001 - not a version event: the workers route those to the DLQ
            continue
        if decoded.record["policy_name"] == policy_name:
            found[decoded.record["policy_version"]] = decoded.record
    return found
