"""Poison records at 1 in 100 events: every one ends in ``webgym.dlq``, no processor stalls.

During a run with 16 episodes in flight, the test follows the loop's topics and, for every 100
events the loop writes, injects one poison record, rotating its kind and topic over every topic
a processor or worker of the loop consumes, keyed by a live episode so it lands in a live
partition (the sampler's topic: by its one key):

- corrupt bytes (not an Avro single-object encoding): ``CorruptEventError``;
- a valid single-object header with a fingerprint no schema has: ``UnknownSchemaError``;
- an out-of-order step, a well-formed event of a live episode whose step it never asked for
  (an observation, inference or infer request far ahead, a navigate op after step 0, an act op
  far ahead of or behind the episode's last one): ``OutOfOrderStep``.

The delivery report of each injection gives its coordinates; the dead letters must name them
(source topic, partition, offset) with the error class, in the record and in its headers. Every
episode still ends with a normal reason, and the checker (`webgym check`) passes.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any

from infra.dead_letters import (
    HEADER_ERROR_CLASS,
    HEADER_OFFSET,
    HEADER_PARTITION,
    HEADER_TOPIC,
)
from infra.log_reader import TopicReader, read_topic
from infra.producer import build_producer
from infra.settings import Settings
from schemas.serde import MARKER, default_catalog
from tests.chaos.conftest import Fault, assert_nothing_lost, chaos_options, chaos_run

IN_FLIGHT = 16
# Twice the battery's 1 in 200: the same 14 poison records or more (the schedule's first 14 cover
# every kind and every consumed topic) in half the run.
EPISODES = 100  # about 15 events an episode: 14 poison records or more
EVERY = 100  # events of the loop per poison record
AHEAD = 10  # steps ahead of the episode an out-of-order event names
# What the loop's processors and workers consume (the task catalog reads `tasks`, which only the
# task loader writes, and skips what does not decode; `trajectories.success` has no consumer
# without a learner).
CONSUMED = (
    "episodes",
    "ops.navigate",
    "ops.act",
    "ops.infer",
    "observations",
    "inferences",
    "trajectories",
    "trajectories.scored",
    "curriculum",
)
ERROR_CLASS = {
    "corrupt": "CorruptEventError",
    "fingerprint": "UnknownSchemaError",
    "ahead": "OutOfOrderStep",
    "behind": "OutOfOrderStep",
}
# The rotation: every consumed topic and every kind within the first 14, then the rest.
SCHEDULE: tuple[tuple[str, str], ...] = (
    ("corrupt", "observations"),
    ("fingerprint", "ops.act"),
    ("ahead", "inferences"),
    ("corrupt", "ops.infer"),
    ("fingerprint", "episodes"),
    ("ahead", "ops.act"),
    ("corrupt", "trajectories"),
    ("ahead", "ops.navigate"),
    ("ahead", "ops.infer"),
    ("fingerprint", "trajectories.scored"),
    ("ahead", "observations"),
    ("corrupt", "curriculum"),
    ("behind", "ops.act"),
    ("fingerprint", "ops.infer"),
    ("corrupt", "inferences"),
    ("fingerprint", "observations"),
    ("corrupt", "ops.navigate"),
    ("corrupt", "episodes"),
    ("fingerprint", "inferences"),
    ("corrupt", "ops.act"),
    ("fingerprint", "ops.navigate"),
    ("fingerprint", "trajectories"),
    ("corrupt", "trajectories.scored"),
    ("fingerprint", "curriculum"),
)
NORMAL_ENDS = {"answer", "horizon", "parse errors"}
# Poison stops once fewer episodes than this are left to end: the workers are stopped when the
# last one ends, and a record injected just before might not have been consumed yet.
RUNNING_AT_LEAST = 3


@dataclass
class Poison:
    kind: str
    suffix: str
    key: str
    what: str
    partition: int = -1
    offset: int = -1


@dataclass
class Episode:
    last: dict[str, dict[str, Any]] = field(default_factory=dict)  # suffix -> last record
    step: int = 0  # the highest step of any of its events
    act_step: int = 0  # the step of its last act op
    ended: bool = False


class Poisoner:
    """Follows the loop's topics; injects one poison record per ``EVERY`` events it wrote."""

    def __init__(self, settings: Settings, run_id: str):
        self.settings = settings
        self.prefix = f"{run_id}-"
        self.fault = Fault(f"poison records 1/{EVERY} (corrupt, unknown fingerprint, out of order)")
        self.catalog = default_catalog()
        self.producer = build_producer(settings, "chaos-poisoner")
        self.tail: TopicReader | None = None
        self.events = 0  # of the loop, while poison was injected
        self.episodes: dict[str, Episode] = defaultdict(Episode)
        self.poisons: list[Poison] = []
        self.injected: set[tuple[str, int, int]] = set()
        self.skipped: list[str] = []  # schedule entries no episode could take
        self.stopped = False

    def strike(self, summary, children) -> None:
        if self.stopped:
            return
        if summary.ended > EPISODES - RUNNING_AT_LEAST:
            self.stopped = True
            return
        if self.tail is None:
            self.tail = TopicReader(self.settings, CONSUMED)
        while batch := self.tail.poll(0, 2000):
            for tail_event in batch:
                self._follow(tail_event.suffix, tail_event.event)
        while self.events >= (len(self.poisons) + len(self.skipped) + 1) * EVERY:
            kind, suffix = SCHEDULE[(len(self.poisons) + len(self.skipped)) % len(SCHEDULE)]
            made = self._make(kind, suffix)
            if made is None:
                self.skipped.append(f"{kind} on {suffix}")
                continue
            self._inject(*made)

    def close(self) -> None:
        if self.tail is not None:
            self.tail.close()

    # -- following the run ----------------------------------------------------------------------

    def _follow(self, suffix: str, event) -> None:
        if (suffix, event.partition, event.offset) in self.injected:
            return
        self.events += 1
        record = event.record
        episode_id = record.get("episode_id") or ""
        if event.event_type is None or not episode_id.startswith(self.prefix):
            return
        episode = self.episodes[episode_id]
        if suffix == "episodes" and record["kind"] != "started":
            episode.ended = True
        if suffix in ("ops.navigate", "ops.act", "ops.infer", "observations", "inferences"):
            if suffix != "observations" or not record.get("failure"):
                episode.last[suffix] = record
            episode.step = max(episode.step, record["step"])
            if suffix == "ops.act":
                episode.act_step = max(episode.act_step, record["step"])

    def _victim(self, needs: str | None = None, act_step_at_least: int = 0) -> str | None:
        """The episode started last that has a record on ``needs``: a live one if any."""
        for live in (True, False):
            for episode_id in reversed(list(self.episodes)):
                episode = self.episodes[episode_id]
                if episode.ended == live or (needs and needs not in episode.last):
                    continue
                if episode.act_step >= act_step_at_least:
                    return episode_id
        return None

    # -- poison ---------------------------------------------------------------------------------

    def _make(self, kind: str, suffix: str) -> tuple[Poison, bytes] | None:
        if kind in ("corrupt", "fingerprint"):
            key = "sampler" if suffix == "curriculum" else self._victim()
            if key is None:
                return None
            if kind == "corrupt":
                value = b"\x00poison:" + os.urandom(24)
                return Poison(kind, suffix, key, "corrupt bytes"), value
            fingerprint = os.urandom(8)
            assert fingerprint not in {v.fingerprint for v in self.catalog.versions()}
            body = self.catalog.encode("curriculum", {"event_id": "x", "ts": 0, "kind": "tick"})
            value = MARKER + fingerprint + body[len(MARKER) + 8 :]
            return Poison(kind, suffix, key, f"fingerprint {fingerprint.hex()}"), value
        episode_id = self._victim(suffix, act_step_at_least=2 if kind == "behind" else 0)
        if episode_id is None:
            return None
        episode = self.episodes[episode_id]
        record = dict(episode.last[suffix])
        if suffix == "ops.navigate":
            step = AHEAD
        elif suffix == "ops.act":
            step = episode.act_step - 1 if kind == "behind" else episode.act_step + AHEAD
        else:
            step = episode.step + AHEAD
        name = {
            "ops.navigate": "navigate",
            "ops.act": "act",
            "ops.infer": "infer",
            "observations": "observation",
            "inferences": "inference",
        }[suffix]
        record.update(step=step, event_id=f"{episode_id}:{step}:{name}")
        if suffix == "inferences":
            record["request_event_id"] = f"{episode_id}:{step}:infer"
        event_type = {
            "ops.navigate": "navigate_op",
            "ops.act": "act_op",
            "ops.infer": "infer_request",
            "observations": "observation",
            "inferences": "inference",
        }[suffix]
        what = f"{name} for step {step} (episode at step {episode.step})"
        return Poison(kind, suffix, episode_id, what), self.catalog.encode(event_type, record)

    def _inject(self, poison: Poison, value: bytes) -> None:
        reports = []
        self.producer.produce(
            self.settings.topic(poison.suffix),
            key=poison.key.encode(),
            value=value,
            on_delivery=lambda error, message: reports.append((error, message)),
        )
        assert self.producer.flush(30) == 0, "a poison record was not acknowledged"
        ((error, message),) = reports
        assert error is None, error
        poison.partition, poison.offset = message.partition(), message.offset()
        self.poisons.append(poison)
        self.injected.add((poison.suffix, poison.partition, poison.offset))
        self.fault.mark()


def test_poison_records_one_in_100_all_dead_lettered_nothing_stalls(run_settings, request):
    options = chaos_options("px", episodes=EPISODES, in_flight=IN_FLIGHT, seed=3)
    run_id = options.run_id
    poisoner = Poisoner(run_settings, run_id)
    try:
        result = chaos_run(run_settings, options, poisoner.fault, poisoner.strike, request)
    finally:
        poisoner.close()
    poisons = poisoner.poisons
    (run_settings.state_dir / "chaos" / f"{request.node.name}-poisons.json").write_text(
        json.dumps({"events": poisoner.events, "poisons": [asdict(p) for p in poisons]}, indent=1)
    )
    # 1 in 100 of the events the loop wrote (until its last episodes), every kind among them
    assert poisoner.stopped
    assert len(poisons) + len(poisoner.skipped) == poisoner.events // EVERY, poisoner.events
    injected = (poisoner.events, [f"{p.kind} on {p.suffix}" for p in poisons], poisoner.skipped)
    assert {p.kind for p in poisons} == set(ERROR_CLASS), injected
    assert {p.suffix for p in poisons} == set(CONSUMED), injected
    assert {(p.kind, p.suffix) for p in poisons} >= {("ahead", "ops.infer")}, injected
    assert len(poisoner.skipped) <= len(poisons) // 4, poisoner.skipped

    # Every poison record is in the dead-letter topic, by its coordinates, with its class.
    dead: dict[tuple[str, int, int], list] = defaultdict(list)
    for event in read_topic(run_settings, "dlq"):
        record = event.record
        dead[(record["source_topic"], record["source_partition"], record["source_offset"])].append(
            event
        )
    for poison in poisons:
        topic = run_settings.topic(poison.suffix)
        letters = dead.get((topic, poison.partition, poison.offset))
        assert letters, f"not dead-lettered: {poison}"
        for letter in letters:
            headers = dict(letter.headers)
            assert letter.record["error_class"] == ERROR_CLASS[poison.kind], (poison, letter)
            assert letter.record["error_message"], poison
            assert letter.record["original_key"] == poison.key.encode()
            assert headers[HEADER_TOPIC] == topic.encode()
            assert headers[HEADER_PARTITION] == str(poison.partition).encode()
            assert headers[HEADER_OFFSET] == str(poison.offset).encode()
            assert headers[HEADER_ERROR_CLASS] == ERROR_CLASS[poison.kind].encode()
    # ...and nothing else was: the loop's own events all went through.
    poisoned = {(run_settings.topic(p.suffix), p.partition, p.offset) for p in poisons}
    assert set(dead) <= poisoned, sorted(set(dead) - poisoned)

    # No processor stalled and no episode paid for it: every one ended, with a normal reason.
    assert_nothing_lost(result, EPISODES)
    summary = result.summary
    assert summary.aborted == 0 and set(summary.terminations) <= NORMAL_ENDS, summary.terminations
    assert summary.judged == EPISODES and summary.successes > 0
    assert result.row["dead_letters"] >= sum(p.key != "sampler" for p in poisons)
