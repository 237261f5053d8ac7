"""The online learner: the success stream in, published policy versions out.

Reads ``webgym.trajectories.success`` in its own consumer group while rollouts go on and trains
with filtered behaviour cloning (:class:`Learner`). Guarantees: versions only go up, and only one
is announced per number. A learner killed at any point restarts from the newest *announced*
version: its weights, optimiser state and window, with the consumer at that manifest's input
offsets (the manifest is the truth; the committed offsets mirror it). Objects of a version no
event announces are deleted first. So, along the published lineage, every sample of the success
stream is trained as new exactly once (or dropped as stale, recorded), never twice, never
skipped. A version announced by someone else (``webgym policy rollback``) supersedes unpublished
work: the learner resumes from it.
"""

from __future__ import annotations

import logging
import tempfile
import threading
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from minio.error import S3Error

from infra.consumer import ConsumedEvent, EventConsumer, build_consumer
from infra.dead_letters import DeadLetterRouter
from infra.log_reader import EventUnavailable, OffsetFetcher
from infra.minio_store import build_minio, ensure_buckets, put_bytes, read_bytes
from infra.producer import EventProducer
from infra.settings import Settings
from infra.tensorboard import ScalarLog
from infra.weights import (
    fetch_weights,
    latest_announced,
    prune_versions,
    publish_weights,
    read_manifest,
    remove_unannounced,
    state_prefix,
)
from learner.samples import Sample, SampleBuilder
from learner.trainer import Trainer, TrainerConfig
from learner.window import SampleWindow, is_stale, sample_key
from schemas.purpose import is_eval

log = logging.getLogger(__name__)

OPTIMIZER_STATE = "optimizer.pt"
UNLABELLED = "unlabelled"  # the phase of a sample whose run named none


class LearnerError(RuntimeError):
    """A learner that cannot go on as configured (the message says what to change)."""


class Superseded(RuntimeError):
    """A newer version than this learner's was announced by someone else (a rollback)."""


@dataclass(frozen=True)
class LearnerConfig:
    policy_name: str = "default"
    group_id: str = "webgym-learner"
    fresh_per_step: int = 8  # new samples per optimiser step (whole success records)
    replay_per_step: int = 8  # window samples per optimiser step
    publish_every: int = 4  # optimiser steps per published version
    window: int = 256  # samples kept for replay
    recency_half_life: float = 64.0  # in samples
    max_staleness: int = 4  # versions a sample's policy may lag the learner's
    keep_versions: int = 5  # stored versions (rollback targets); older ones are deleted
    idle_s: float = 30.0  # input quiet this long: train what is pending and publish
    exit_when_idle: bool = False  # then stop (batch use and tests)
    seed: int = 0
    tensorboard: str | None = None  # write the loss per optimiser step to this directory
    # Train only on successes of these runs (an episode of run R is R-<n>); empty: every run.
    runs: tuple[str, ...] = ()


@dataclass
class PendingRecord:
    partition: int
    offset: int
    samples: list[Sample]
    unavailable: list[str]  # sample keys whose events are gone from the log


@dataclass
class Ledger:
    """What happened since the last published version (goes into the next manifest)."""

    steps: int = 0
    trained: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # eval-marked successes, never trained
    by_phase: dict[str, int] = field(default_factory=dict)  # new samples trained, by phase


def next_batch(
    pending: deque[PendingRecord], fresh_per_step: int, version: int, max_staleness: int
) -> tuple[list[tuple[Sample, int, int]], list[str]]:
    """Pop the next whole records holding at least ``fresh_per_step`` samples (or all there
    are); return their samples that are not stale, with their record's partition and offset,
    and the keys of those dropped (stale, or gone from the log)."""
    taken: list[PendingRecord] = []
    while pending and sum(len(r.samples) for r in taken) < fresh_per_step:
        taken.append(pending.popleft())
    placed, dropped = [], []
    for record in taken:
        dropped.extend(record.unavailable)
        for sample in record.samples:
            if is_stale(sample.policy_version, version, max_staleness):
                dropped.append(sample_key(sample))
            else:
                placed.append((sample, record.partition, record.offset))
    return placed, dropped


def input_offsets(positions: dict[int, int], pending: deque[PendingRecord]) -> dict[int, int]:
    """Per partition, the first record not yet trained: the earliest pending one, else the
    position after the last record read."""
    offsets = dict(positions)
    for record in reversed(pending):  # the earliest pending record of a partition wins
        offsets[record.partition] = record.offset
    return offsets


class Learner:
    """Trains on the success stream and publishes versions.

    Turns each trainable step into a :class:`~learner.samples.Sample`. An optimiser step trains
    the next whole success records (at least ``fresh_per_step`` new samples) together with
    ``replay_per_step`` samples drawn from the recency-weighted window. Every ``publish_every``
    steps (or when input has been idle for ``idle_s``, or on a graceful stop) it publishes the
    next version (:meth:`publish`).
    """

    def __init__(self, settings: Settings, config: LearnerConfig, trainer_config: TrainerConfig):
        if config.fresh_per_step < 1 or config.publish_every < 1:
            raise LearnerError("--fresh-per-step and --publish-every must be at least 1")
        self.settings = settings
        self.config = config
        self.trainer_config = trainer_config
        self.topic = settings.topic("trajectories.success")
        client_id = f"{config.group_id}-{config.policy_name}"
        self.producer = EventProducer.connect(settings, client_id)
        self.consumer = EventConsumer(
            build_consumer(settings, config.group_id, client_id),
            DeadLetterRouter(settings, self.producer),
        )
        self.builder = SampleBuilder(settings)
        self.records = OffsetFetcher(settings, "trajectories.success")
        self.minio = build_minio(settings)
        ensure_buckets(self.minio, settings)
        self.stats: dict[str, Any] = {
            "optimizer_steps": 0,
            "samples_trained": 0,  # new and replayed
            "train_s": 0.0,
            "published": [],  # (version, seconds, bytes)
            "resumed_from": None,
            "removed_unannounced": [],
            "refused_eval": 0,  # eval-marked successes skipped (the filter should pass none)
            "other_runs_skipped": 0,  # successes of runs outside ``config.runs``
        }
        self._run_prefixes = tuple(f"{run}-" for run in config.runs)
        self.scalars = ScalarLog(config.tensorboard)
        self.trainer: Trainer | None = None
        self.version = 0
        self.samples_seen = 0
        self.optimizer_steps = 0
        self.window = SampleWindow(config.window, config.recency_half_life)
        self.pending: deque[PendingRecord] = deque()
        self.positions: dict[int, int] = {}
        self.ledger = Ledger()
        self._held = False

    # -- the loop -------------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Train and publish until ``stop`` is set (or input is idle, with ``exit_when_idle``)."""
        self.resume()
        last_input = time.monotonic()
        while not stop.is_set():
            events = self.consumer.consume(64, timeout=0.5)
            for event in events:
                self._ingest(event)
            if events:
                last_input = time.monotonic()
            idle = time.monotonic() - last_input >= self.config.idle_s
            try:
                while self.pending and (
                    idle or self._fresh_pending() >= self.config.fresh_per_step
                ):
                    self._train_step()
                    if self.ledger.steps >= self.config.publish_every:
                        self.publish()
                    if stop.is_set():
                        break
                if idle and self.ledger.steps:
                    self.publish()
            except Superseded as superseded:
                log.warning("%s; resuming from it, unpublished steps are dropped", superseded)
                self.resume()
                continue
            if self.config.exit_when_idle and idle and not self.pending and not self.ledger.steps:
                log.info(
                    "input idle for %.0f s and everything published: exiting", self.config.idle_s
                )
                break
        if self.ledger.steps:
            try:
                self.publish()  # a graceful stop keeps what was trained
            except Superseded as superseded:
                log.warning("%s; unpublished steps dropped", superseded)

    def resume(self) -> None:
        """Start over from the newest announced version (or the base model) and its offsets."""
        name = self.config.policy_name
        latest = latest_announced(self.settings, name)
        announced = latest["policy_version"] if latest else 0
        leftovers = remove_unannounced(self.minio, self.settings, name, announced)
        if leftovers:
            log.warning("deleted unannounced (interrupted) uploads of %s: v%s", name, leftovers)
            self.stats["removed_unannounced"].extend(leftovers)
        self.pending.clear()
        self.ledger = Ledger()
        self.window = SampleWindow(self.config.window, self.config.recency_half_life)
        self.trainer = None  # free the old model first
        offsets: dict[int, int] = {}
        if latest is None:
            self.trainer = Trainer(self.trainer_config)
            self.version, self.samples_seen, self.optimizer_steps = 0, 0, 0
            log.info(
                "no published version of %s yet: training from %s", name, self.trainer_config.model
            )
        else:
            manifest = read_manifest(self.minio, self.settings, name, announced)
            self._check_compatible(manifest.base_model, manifest.files)
            weights = fetch_weights(self.minio, latest, self.settings.cache_dir / "learner-weights")
            self.trainer = Trainer(self.trainer_config, weights, self._optimizer_state(announced))
            self.version = announced
            self.samples_seen = manifest.samples_seen
            self.optimizer_steps = int(manifest.training.get("optimizer_steps", 0))
            for where, offset in manifest.input_offsets.items():
                topic, _, partition = where.rpartition(":")
                if topic == self.topic:
                    offsets[int(partition)] = offset
            self._rebuild_window(manifest.training.get("window", []))
            self.stats["resumed_from"] = announced
            log.info(
                "resumed %s from v%d (%d samples seen, window %d, offsets %s)",
                name,
                announced,
                self.samples_seen,
                len(self.window),
                offsets,
            )
        self.positions = dict(offsets)
        self.consumer.assign(self.topic, offsets)
        log.info("ready at v%d of %s", self.version, name)

    # -- steps ----------------------------------------------------------------------------------

    def _ingest(self, event: ConsumedEvent) -> None:
        if is_eval(event.record):
            self._refuse(event)
            return
        if self.config.runs and not event.record["episode_id"].startswith(self._run_prefixes):
            self.stats["other_runs_skipped"] += 1  # another run's success: read, not trained
            self.positions[event.partition] = event.offset + 1
            return
        built = self.builder.build(event.record)
        for episode_id, step, why in built.unavailable:
            log.warning("sample %s:%d is gone from the log, not trained: %s", episode_id, step, why)
        unavailable = [f"{episode_id}:{step}" for episode_id, step, _ in built.unavailable]
        self.pending.append(
            PendingRecord(event.partition, event.offset, built.samples, unavailable)
        )
        self.positions[event.partition] = event.offset + 1

    def _refuse(self, event: ConsumedEvent) -> None:
        """An evaluation episode is never trained on, even if one reaches the success stream
        (the filter passes none): it is skipped as read, recorded in the ledger and counted."""
        episode_id = event.record["episode_id"]
        if not self.stats["refused_eval"]:
            # Once: a broken filter would otherwise flood the log with one line per record.
            log.error(
                "%s at %s:%d is an evaluation episode on the success stream; not trained "
                "(is an old filter running?)",
                episode_id,
                self.topic,
                event.offset,
            )
        self.stats["refused_eval"] += 1
        self.ledger.refused.append(episode_id)
        self.positions[event.partition] = event.offset + 1

    def _fresh_pending(self) -> int:
        return sum(len(record.samples) for record in self.pending)

    def _train_step(self) -> None:
        """Train the next whole records (>= fresh_per_step samples) with a replay draw."""
        placed, dropped = next_batch(
            self.pending, self.config.fresh_per_step, self.version, self.config.max_staleness
        )
        self.ledger.dropped.extend(dropped)
        if not placed:
            return
        fresh = [sample for sample, _, _ in placed]
        replay = self.window.draw(
            self.config.replay_per_step, self.config.seed * 1_000_003 + self.optimizer_steps
        )
        batch = fresh + [entry.sample for entry in replay]
        started = time.perf_counter()
        loss = self.trainer.step(batch)
        elapsed = time.perf_counter() - started
        self.optimizer_steps += 1
        self.samples_seen += len(fresh)
        self.ledger.steps += 1
        self.ledger.losses.append(round(loss, 6))
        self.ledger.trained.extend(sample_key(s) for s in fresh)
        for sample in fresh:
            phase = sample.phase or UNLABELLED
            self.ledger.by_phase[phase] = self.ledger.by_phase.get(phase, 0) + 1
        self.scalars.scalar("train/loss", loss, self.optimizer_steps)
        self.scalars.scalar("train/samples_seen", self.samples_seen, self.optimizer_steps)
        for sample, partition, offset in placed:
            self.window.add(sample, partition, offset)
        self.stats["optimizer_steps"] += 1
        self.stats["samples_trained"] += len(batch)
        self.stats["train_s"] += elapsed
        log.info(
            "step %d: loss %.4f on %d new + %d replayed samples in %.2f s (window %d, pending %d)",
            self.optimizer_steps,
            loss,
            len(fresh),
            len(replay),
            elapsed,
            len(self.window),
            self._fresh_pending(),
        )
        self._hold("after-step")

    def input_offsets(self) -> dict[int, int]:
        return input_offsets(self.positions, self.pending)

    def publish(self) -> dict[str, Any]:
        """Publish the next version, then commit the input offsets, in this order:

        1. the optimiser state to ``learner-state/<name>/v<N>/``;
        2. the weights and then the manifest to ``policies/<name>/v<N>/``
           (:func:`publish_weights`); the manifest records the base model, every file's sha256,
           the samples seen, the input offsets, and the learner's ledger: which samples were
           trained (or dropped as stale) since ``v<N-1>``;
        3. the ``webgym.policy.versions`` event, acknowledged;
        4. only then, the group's offsets: the position after the last record trained into
           ``v<N>``.
        """
        name = self.config.policy_name
        latest = latest_announced(self.settings, name)
        if latest is not None and latest["policy_version"] > self.version:
            raise Superseded(
                f"{name} v{latest['policy_version']} was announced while this learner was at "
                f"v{self.version}"
            )
        version = self.version + 1
        offsets = self.input_offsets()
        started = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="webgym-learner-") as scratch:
            directory = Path(scratch) / f"v{version}"
            self.trainer.save(directory)
            size = sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())
            put_bytes(
                self.minio,
                self.settings.policies_bucket,
                state_prefix(name, version) + OPTIMIZER_STATE,
                self.trainer.optimizer_state(),
                "application/octet-stream",
            )
            event = publish_weights(
                self.minio,
                self.settings,
                self.producer,
                name,
                version,
                directory,
                self.trainer_config.model,
                samples_seen=self.samples_seen,
                input_offsets={f"{self.topic}:{p}": o for p, o in sorted(offsets.items())},
                parent_version=self.version or None,
                training=self._training_record(),
                after_file=lambda n: self._hold("mid-upload"),
            )
        self._hold("after-announce")
        self.consumer.commit_offsets(self.topic, offsets)
        seconds = time.perf_counter() - started
        self.version = version
        self.ledger = Ledger()
        self.window.drop_stale(version, self.config.max_staleness)
        removed = prune_versions(
            self.minio, self.settings, name, version, self.config.keep_versions
        )
        self.stats["published"].append((version, round(seconds, 3), size))
        log.info(
            "published %s v%d (%.1f MB) in %.2f s; offsets %s committed%s",
            name,
            version,
            size / 1e6,
            seconds,
            offsets,
            f"; deleted v{removed}" if removed else "",
        )
        self.scalars.flush()
        return event

    # -- helpers --------------------------------------------------------------------------------

    def _training_record(self) -> dict[str, Any]:
        return {
            "optimizer_steps": self.optimizer_steps,
            "steps": self.ledger.steps,
            "losses": self.ledger.losses,
            "trained_samples": self.ledger.trained,
            "dropped_samples": self.ledger.dropped,
            "refused_eval": self.ledger.refused,
            "trained_by_phase": self.ledger.by_phase,
            "window": [
                [e.partition, e.offset, e.sample.episode_id, e.sample.step]
                for e in self.window.entries()
            ],
            "lora_rank": self.trainer_config.lora_rank,
            "learner": asdict(self.config),
        }

    def _check_compatible(self, base_model: str, files: dict[str, str]) -> None:
        if base_model != self.trainer_config.model:
            raise LearnerError(
                f"{self.config.policy_name} was trained from {base_model!r}, not "
                f"{self.trainer_config.model!r}: start the learner with --model {base_model} "
                "or choose another --policy-name"
            )
        adapter = "adapter_config.json" in files
        if adapter != self.trainer_config.lora:
            kind = "LoRA adapters" if adapter else "full weights"
            option = "--lora-rank N (N > 0)" if adapter else "--lora-rank 0"
            raise LearnerError(
                f"{self.config.policy_name} holds {kind}; start the learner with {option} "
                "or choose another --policy-name"
            )

    def _optimizer_state(self, version: int) -> bytes | None:
        name = state_prefix(self.config.policy_name, version) + OPTIMIZER_STATE
        try:
            return read_bytes(self.minio, self.settings.policies_bucket, name)
        except S3Error as exc:
            if exc.code != "NoSuchKey":
                raise
            log.info("v%d has no optimiser state (a rollback?): a fresh optimiser", version)
            return None

    def _rebuild_window(self, entries: list[list[Any]]) -> None:
        """The window again, from the success records it points at (Kafka is the replay buffer)."""
        wanted: dict[tuple[int, int], set[int]] = {}
        for partition, offset, _, step in entries:
            wanted.setdefault((partition, offset), set()).add(step)
        built: dict[tuple[int, int, int], Sample] = {}
        for (partition, offset), steps in wanted.items():
            try:
                record = self.records.fetch(partition, offset)
            except EventUnavailable as exc:
                log.warning("window entry gone from the log: %s", exc)
                continue
            for sample in self.builder.build(record).samples:
                if sample.step in steps:
                    built[(partition, offset, sample.step)] = sample
        for partition, offset, _, step in entries:
            sample = built.get((partition, offset, step))
            if sample is not None:
                self.window.add(sample, partition, offset)

    def _hold(self, point: str) -> None:
        """Crash tests: stop here and wait to be killed (``WEBGYM_LEARNER_HOLD_AT``)."""
        if self.settings.learner_hold_at != point or self._held:
            return
        self._held = True
        print(f"learner holding at {point}", flush=True)
        while True:
            time.sleep(3600)

    def close(self) -> None:
        self.scalars.close()
        self.consumer.close()
        self.builder.close()
        self.records.close()
        self.producer.flush()
