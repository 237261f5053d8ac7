"""One episode rebuilt from the log alone: every step's screenshot, reply, action and timings,
and the verdicts of its judge.

:func:`load_replay` reads only the episode's own partition of each topic; :func:`assemble` is
pure: it pairs the events into steps whatever their order and duplicates (at least once
delivery: the first copy of each ``event_id`` wins). A step shows the screenshot the policy saw
(the latest observation before it; after an unparseable reply the policy sees the same page
again), the reply, and the action that was sent to the browser.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from aiokafka.partitioner import DefaultPartitioner

from analytics.errors import AnalyticsError
from infra.consumer import build_consumer
from infra.log_reader import EventUnavailable, OffsetFetcher, TopicReader
from infra.screenshot_store import ScreenshotStore
from infra.settings import Settings
from infra.topics import event_type
from schemas.inference import backend_error, parse_error
from schemas.observation import PageCapture

# Producers stamp events with their own clocks; a start read this much early misses nothing.
CLOCK_MARGIN_MS = 60_000
LIST_HINT = "find episode ids with `webgym replay --list`"


@dataclass(frozen=True)
class Frame(PageCapture):
    """One observation: the page after a browser operation (step 0: the first navigation)."""

    event_id: str
    step: int
    ts: int
    action_error: str | None
    failure: str | None
    timings_ms: dict[str, float]
    marks: list[dict[str, Any]] | None

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Frame:
        return cls(
            event_id=record["event_id"],
            step=record["step"],
            ts=record["ts"],
            screenshot=record.get("screenshot") or b"",
            screenshot_format=record.get("screenshot_format") or "jpeg",
            width=record.get("width") or 0,
            height=record.get("height") or 0,
            url=record.get("url") or "",
            title=record.get("title") or "",
            action_error=record.get("action_error"),
            failure=record.get("failure"),
            timings_ms=dict(record.get("timings_ms") or {}),
            marks=record.get("set_of_marks"),
        )

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.screenshot).hexdigest()


@dataclass(frozen=True)
class ReplayStep:
    """Step ``step`` of the policy: what it saw (``frame``), thought, and did."""

    step: int
    frame: Frame | None
    frame_missing: str | None  # why there is no frame (gone with retention, never recorded)
    action: dict[str, Any] | None  # as parsed from the reply (None: it did not parse)
    sent_action: dict[str, Any] | None  # as sent to the browser (None: answer, parse error, end)
    thought: str | None = None
    memory: str | None = None
    raw_text: str | None = None
    parse_error: str | None = None
    backend_error: str | None = None  # the backend gave no reply (failed, timed out)
    latency_ms: float | None = None
    policy_version: int | None = None
    backend: str | None = None
    model: str | None = None
    repeated: bool | None = None  # the repetition filter's verdict (judged episodes only)
    inference_missing: str | None = None
    inference_ts: int | None = None
    act_ts: int | None = None


@dataclass(frozen=True)
class Replay:
    episode_id: str
    state: str  # judged / ended (not judged yet) / running
    source: str  # "scored trajectory" or "raw topics"
    task_id: str = ""
    instruction: str = ""
    website: str = ""
    difficulty: str = ""
    horizon: int | None = None
    start_url: str = ""
    setup: str | None = None
    started_ts: int | None = None
    ended_ts: int | None = None
    end_kind: str | None = None  # finished / aborted
    reason: str | None = None  # answer, horizon, parse errors..., browser: ...
    final_answer: str | None = None
    steps: tuple[ReplayStep, ...] = ()
    final_frame: Frame | None = None  # a page after the last step that no step saw
    reward: float | None = None
    verdicts: tuple[dict[str, Any], ...] = ()
    judge_name: str | None = None
    judge_version: str | None = None
    judge_error: str | None = None
    blocked: bool = False
    block_reason: str | None = None
    policy_versions: tuple[int, ...] = ()
    # What ``--rerun`` needs: the first navigation, and the act ops and observations by step.
    navigate_op: dict[str, Any] | None = None
    act_ops: dict[int, dict[str, Any]] = field(default_factory=dict)
    frames: dict[int, Frame] = field(default_factory=dict)


def _first_by_event_id(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: set[str] = set()
    out = []
    for record in records:
        if record.get("event_id") in seen:
            continue
        seen.add(record.get("event_id"))
        out.append(record)
    return out


def assemble(
    episode_id: str,
    *,
    episode_events: Iterable[dict[str, Any]] = (),
    navigate_ops: Iterable[dict[str, Any]] = (),
    act_ops: Iterable[dict[str, Any]] = (),
    observations: Iterable[dict[str, Any]] = (),
    inferences: Iterable[dict[str, Any]] = (),
    scored: dict[str, Any] | None = None,
    task: dict[str, Any] | None = None,
    missing: dict[str, str] | None = None,
) -> Replay:
    """The replay of ``episode_id`` from its events (records of other episodes are ignored).

    With ``scored`` (the judge's trajectory) its steps are the steps and the observations and
    inferences are matched by the event ids it names; without it the steps are the inferences
    in step order, each with the latest observation before it. ``missing`` maps an event id that
    could not be read to why (e.g. retention), shown in place of the event.
    """
    missing = missing or {}

    def mine(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        return _first_by_event_id(r for r in records if r.get("episode_id") == episode_id)

    episode_events = mine(episode_events)
    navigate = min(mine(navigate_ops), key=lambda r: r["step"], default=None)
    acts = {r["step"]: r for r in reversed(mine(act_ops))}  # first copy per step wins
    frames_by_id = {r["event_id"]: Frame.from_record(r) for r in mine(observations)}
    frames: dict[int, Frame] = {}
    for frame in frames_by_id.values():
        frames.setdefault(frame.step, frame)
    replies = {r["event_id"]: r for r in mine(inferences)}
    started = next((e for e in episode_events if e["kind"] == "started"), None)
    end = next((e for e in episode_events if e["kind"] != "started"), None)

    steps: list[ReplayStep] = []
    if scored is not None:
        for item in scored["steps"]:
            frame = frames_by_id.get(item["observation_event_id"])
            reply = replies.get(item["inference_event_id"])
            steps.append(
                _step(
                    item["step"],
                    frame,
                    None if frame else missing.get(item["observation_event_id"], "not read"),
                    reply,
                    None if reply else missing.get(item["inference_event_id"], "not read"),
                    acts.get(item["step"]),
                    parsed=item.get("action"),
                    repeated=item.get("repeated"),
                    policy_version=item.get("policy_version"),
                )
            )
    else:
        seen_steps = sorted(frames)
        for reply in sorted(replies.values(), key=lambda r: r["step"]):
            before = [s for s in seen_steps if s < reply["step"] and not frames[s].failure]
            frame = frames[before[-1]] if before else None
            steps.append(
                _step(
                    reply["step"],
                    frame,
                    None if frame else "no observation before this step in the log",
                    reply,
                    None,
                    acts.get(reply["step"]),
                )
            )
    seen_ids = {s.frame.event_id for s in steps if s.frame is not None}
    last_seen = max((s.frame.step for s in steps if s.frame is not None), default=-1)
    later = [f for f in frames.values() if f.event_id not in seen_ids and f.step > last_seen]
    final_frame = max(later, key=lambda f: f.step, default=None)

    if scored is not None:
        state = "judged"
    elif end is not None:
        state = "ended"
    else:
        state = "running"
    source = scored or {}
    task = task or {}
    policy_versions = source.get("policy_versions") or sorted(
        {s.policy_version for s in steps if s.policy_version is not None}
    )
    return Replay(
        episode_id=episode_id,
        state=state,
        source="scored trajectory" if scored is not None else "raw topics",
        task_id=source.get("task_id")
        or (started or end or {}).get("task_id")
        or (navigate or {}).get("task_id", ""),
        instruction=source.get("instruction") or task.get("task_name", ""),
        website=source.get("website") or task.get("website", ""),
        difficulty=source.get("difficulty") or task.get("difficulty", ""),
        horizon=source.get("horizon") or (started or {}).get("horizon"),
        start_url=(navigate or {}).get("url") or (started or {}).get("start_url") or "",
        setup=(navigate or {}).get("setup"),
        started_ts=(started or {}).get("ts") or source.get("started_ts"),
        ended_ts=(end or {}).get("ts"),
        end_kind=(end or {}).get("kind") or _scored_end_kind(scored),
        reason=(end or {}).get("reason") or source.get("termination"),
        final_answer=source.get("final_answer") or (end or {}).get("final_answer"),
        steps=tuple(steps),
        final_frame=final_frame,
        reward=source.get("reward"),
        verdicts=tuple(source.get("verdicts") or ()),
        judge_name=source.get("judge_name"),
        judge_version=source.get("judge_version"),
        judge_error=source.get("judge_error"),
        blocked=bool(source.get("blocked")),
        block_reason=source.get("block_reason"),
        policy_versions=tuple(policy_versions),
        navigate_op=navigate,
        act_ops=acts,
        frames=frames,
    )


def _scored_end_kind(scored: dict[str, Any] | None) -> str | None:
    if scored is None:
        return None
    return "aborted" if scored.get("aborted") else "finished"


def _step(
    step: int,
    frame: Frame | None,
    frame_missing: str | None,
    reply: dict[str, Any] | None,
    reply_missing: str | None,
    act: dict[str, Any] | None,
    parsed: dict[str, Any] | None = None,
    repeated: bool | None = None,
    policy_version: int | None = None,
) -> ReplayStep:
    reply = reply or {}
    return ReplayStep(
        step=step,
        frame=frame,
        frame_missing=frame_missing,
        action=parsed if parsed is not None else reply.get("action"),
        sent_action=act["action"] if act else None,
        thought=reply.get("thought"),
        memory=reply.get("memory"),
        raw_text=reply.get("raw_text"),
        parse_error=parse_error(reply),
        backend_error=backend_error(reply),
        latency_ms=reply.get("latency_ms"),
        policy_version=reply.get("policy_version", policy_version),
        backend=reply.get("backend"),
        model=reply.get("model"),
        repeated=repeated,
        inference_missing=reply_missing,
        inference_ts=reply.get("ts"),
        act_ts=act["ts"] if act else None,
    )


# -- reading the log ------------------------------------------------------------------------------


def episode_partition(episode_id: str, partitions: int) -> int:
    """The partition of every event keyed ``episode_id`` (murmur2, as every producer uses)."""
    numbers = list(range(partitions))
    return DefaultPartitioner()(episode_id.encode(), numbers, numbers)


def _partition_count(settings: Settings, suffix: str, timeout_s: float = 30.0) -> int:
    topic = settings.topic(suffix)
    consumer = build_consumer(
        settings, group_id="webgym-replay-metadata", client_id="webgym-replay"
    )
    try:
        metadata = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
    finally:
        consumer.close()
    if metadata is None or metadata.error is not None or not metadata.partitions:
        raise AnalyticsError(
            f"topic {topic} does not exist: is WEBGYM_TOPIC_PREFIX={settings.topic_prefix} the "
            "prefix of the run? (`webgym topics list` shows what exists)"
        )
    return len(metadata.partitions)


def _read(
    settings: Settings, suffixes: list[str], partition: int | None, since_ms: int | None
) -> dict[str, list[dict[str, Any]]]:
    with TopicReader(
        settings,
        suffixes,
        since_ms=since_ms,
        partitions=None if partition is None else [partition],
    ) as reader:
        events = reader.read_to_end()
    out: dict[str, list[dict[str, Any]]] = {s: [] for s in suffixes}
    for item in events:
        if item.event.event_type is not None:
            out[item.suffix].append(item.event.record)
    return out


def load_replay(settings: Settings, episode_id: str) -> Replay:
    """The replay of ``episode_id`` as the log tells it now.

    Raises :class:`AnalyticsError` when the log holds no event of the episode.

    Where the events are: every episode-keyed topic uses the murmur2 partitioner and one
    partition count (``streams/app.py``), so all events of episode ``e`` lie in partition
    ``murmur2(e) % partitions`` of each topic, at or after the episode's ``started`` event. The
    loader reads only that partition, from shortly before the start (a margin for producers'
    clocks, :data:`CLOCK_MARGIN_MS`):

    - the ``episodes`` partition from offset 0 (two small events per episode) for the start and
      end;
    - ``ops.navigate``, ``ops.act`` and ``trajectories.scored`` from the start;
    - a judged episode's trajectory names the log position of each step's observation and
      inference: those are fetched one by one (:class:`infra.log_reader.OffsetFetcher`);
    - an episode not judged yet (running, or ended and waiting for its judge) has no trajectory:
      its ``observations`` and ``inferences`` are read from the start instead (``state`` says
      which).
    """
    partition = episode_partition(episode_id, _partition_count(settings, "episodes"))
    episode_events = [
        r
        for r in _read(settings, ["episodes"], partition, None)["episodes"]
        if r.get("episode_id") == episode_id
    ]
    started = next((e for e in episode_events if e["kind"] == "started"), None)
    # Without its start (retention, or not an id at all) read the partition from the beginning.
    since = started["ts"] - CLOCK_MARGIN_MS if started else None
    small = _read(settings, ["ops.navigate", "ops.act", "trajectories.scored"], partition, since)
    scored = next(
        (r for r in reversed(small["trajectories.scored"]) if r.get("episode_id") == episode_id),
        None,
    )
    if not episode_events and scored is None:
        # The episodes topic keeps an episode at least as long as its observations do.
        raise AnalyticsError(
            f"no episode {episode_id!r} in {settings.topic('episodes')}; {LIST_HINT} "
            f"(with WEBGYM_TOPIC_PREFIX={settings.topic_prefix})"
        )
    missing: dict[str, str] = {}
    store = ScreenshotStore(settings)  # observations that keep their screenshot in MinIO
    task = None
    if scored is not None:
        observations, inferences = [], []
        readers = {s: OffsetFetcher(settings, s) for s in ("observations", "inferences")}
        try:
            for item in scored["steps"]:
                for suffix, out in (("observations", observations), ("inferences", inferences)):
                    prefix = event_type(suffix)  # a step names the event as <type>_event_id...
                    event_id = item[f"{prefix}_event_id"]
                    if any(r["event_id"] == event_id for r in out):
                        continue  # the same page again, after an unparseable reply
                    try:
                        record = readers[suffix].fetch(
                            item[f"{prefix}_partition"], item[f"{prefix}_offset"], event_id
                        )
                        out.append(store.with_image(record) if suffix == "observations" else record)
                    except EventUnavailable as gone:
                        missing[event_id] = str(gone)
        finally:
            for reader in readers.values():
                reader.close()
    else:
        raw = _read(settings, ["observations", "inferences"], partition, since)
        observations, inferences = [], raw["inferences"]
        for record in raw["observations"]:
            if record.get("episode_id") != episode_id:
                continue
            try:
                observations.append(store.with_image(record))
            except EventUnavailable as gone:
                missing[record["event_id"]] = str(gone)
        tasks = _read(settings, ["tasks"], None, None)["tasks"]
        task_id = (started or {}).get("task_id") or next(
            (e.get("task_id") for e in episode_events), None
        )
        task = next((t for t in reversed(tasks) if t.get("task_id") == task_id), None)
    return assemble(
        episode_id,
        episode_events=episode_events,
        navigate_ops=small["ops.navigate"],
        act_ops=small["ops.act"],
        observations=observations,
        inferences=inferences,
        scored=scored,
        task=task,
        missing=missing,
    )


def render_replay_html(settings: Settings, episode_id: str) -> str:
    """The self-contained replay page of ``episode_id`` (the dashboard's ``/replay/<id>``).

    Raises :class:`AnalyticsError` for an episode the log does not hold.
    """
    from analytics.replay_html import render_html  # a cycle: replay_html reads this module's Replay

    return render_html(load_replay(settings, episode_id))
