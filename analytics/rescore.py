"""Re-judging stored trajectories into a new scored stream, beside the running system.

Reads ``webgym.trajectories.scored`` (from offset 0, or from a time) and the current task set
(``webgym.tasks``, so a rubric updated since is the one applied), scores every trajectory again
with the chosen judge, and writes ``scored_trajectory`` events to
``webgym.trajectories.rescored.<name>``, a topic of its own created like the scored topic.
Guarantees: nothing of the running system is touched (the inputs are read by fresh readers that
never commit, and the only topic written is the new one); re-running into the same name skips
episodes already there, so an interrupted rescore resumes and the new stream never holds an
episode twice; a task the chosen judge cannot score is skipped and counted, never scored 0.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from analytics.errors import AnalyticsError
from infra.log_reader import TopicReader, read_topic
from infra.producer import EventProducer, now_ms
from infra.settings import Settings
from infra.topic_admin import ensure_topic
from infra.topics import event_type, topic_spec
from schemas.event_ids import episode_event_id
from streams.filters import SCORE_FIELDS, detect_block, is_success
from streams.judging import Judging, scored_event


@dataclass
class Comparison:
    into: str
    rescored: int = 0
    skipped: int = 0  # already in the new stream (an earlier, interrupted rescore)
    not_applicable: int = 0  # the chosen judge cannot score the task (not re-scored, not written)
    rewards_changed: int = 0
    became_success: int = 0
    lost_success: int = 0
    verdicts_changed: int = 0  # per-fact verdicts that differ (or exist on one side only)
    judge_errors: int = 0
    old_judges: set[str] = field(default_factory=set)
    new_judges: set[str] = field(default_factory=set)
    changed_episodes: list[str] = field(default_factory=list)  # reward or a verdict changed
    reward_changed_episodes: list[str] = field(default_factory=list)

    def figures(self) -> dict[str, Any]:
        figures = dataclasses.asdict(self)
        figures["old_judges"] = sorted(self.old_judges)
        figures["new_judges"] = sorted(self.new_judges)
        return figures


def output_suffix(into: str) -> str:
    if not re.fullmatch(r"[a-z0-9][a-z0-9_-]{0,62}", into):
        raise AnalyticsError(
            f"--into {into!r}: use lowercase letters, digits, '-' and '_' (e.g. judge-v2)"
        )
    return f"trajectories.rescored.{into}"


def fact_verdicts(scored: dict[str, Any]) -> dict[tuple[str, str], bool]:
    return {(v["fact_group_id"], v["fact"]): v["satisfied"] for v in scored.get("verdicts") or []}


def compare(old: dict[str, Any], new: dict[str, Any]) -> tuple[bool, int]:
    """Whether the reward changed, and how many per-fact verdicts differ."""
    before, after = fact_verdicts(old), fact_verdicts(new)
    changed = sum(1 for key in before.keys() | after.keys() if before.get(key) != after.get(key))
    return old["reward"] != new["reward"], changed


def trajectory_of(scored: dict[str, Any]) -> dict[str, Any]:
    """The trajectory a scored event was made from (its score fields removed)."""
    trajectory = {k: v for k, v in scored.items() if k not in SCORE_FIELDS}
    trajectory["event_id"] = episode_event_id(scored["episode_id"], "trajectory")
    return trajectory


def rescore(
    settings: Settings,
    judging: Judging,
    into: str,
    since_ms: int | None = None,
    run_id: str | None = None,
    concurrency: int = 8,
    on_progress: Callable[[int, int], None] = lambda done, total: None,
) -> Comparison:
    """Score the stored trajectories again into ``trajectories.rescored.<into>``.

    A judge forced with ``--judge`` that cannot score a task (the verifier on a MiniWoB++ page,
    the page reward on a practice-web task) skips it and counts it: it never turns a score it
    cannot make into reward 0. The returned :class:`Comparison` counts, against the original
    score of each episode, the rewards that changed (and which way, naming the episodes) and the
    per-fact verdicts that changed.
    """
    suffix = output_suffix(into)
    reader = TopicReader(settings, ["trajectories.scored"], since_ms=since_ms)
    try:
        originals: dict[str, dict[str, Any]] = {}
        runs_seen: set[str] = set()
        for item in reader.read_to_end():
            record = item.event.record
            if item.event.event_type != event_type("trajectories.scored"):
                continue
            runs_seen.add(record["episode_id"].rsplit("-", 1)[0])
            if run_id and not record["episode_id"].startswith(f"{run_id}-"):
                continue
            originals.setdefault(record["episode_id"], record)  # the first score is the one
    finally:
        reader.close()
    if run_id and not originals:
        # Refused before the new topic is created: a mistyped run id writes nothing.
        listed = ", ".join(sorted(runs_seen)[-10:]) or "none"
        raise AnalyticsError(
            f"--run {run_id!r}: no scored trajectory of that run in "
            f"{settings.topic('trajectories.scored')}; runs there: {listed}"
        )
    spec = dataclasses.replace(
        topic_spec("trajectories.scored"), suffix=suffix, what=f"re-scored trajectories ({into})"
    )
    ensure_topic(settings, spec)
    already = {e.record["episode_id"] for e in read_topic(settings, suffix) if e.event_type}
    tasks = {e.record["task_id"]: e.record for e in read_topic(settings, "tasks") if e.event_type}
    comparison = Comparison(into)
    comparison.skipped = sum(1 for episode in originals if episode in already)
    todo = [record for episode, record in originals.items() if episode not in already]
    producer = EventProducer.connect(settings, f"webgym-rescore-{into}")
    asyncio.run(
        _rescore_all(
            settings, judging, producer, suffix, tasks, todo, comparison, concurrency, on_progress
        )
    )
    producer.flush()
    return comparison


async def _rescore_all(
    settings: Settings,
    judging: Judging,
    producer: EventProducer,
    suffix: str,
    tasks: dict[str, dict[str, Any]],
    todo: list[dict[str, Any]],
    comparison: Comparison,
    concurrency: int,
    on_progress: Callable[[int, int], None],
) -> None:
    gate = asyncio.Semaphore(max(concurrency, 1))
    topic = settings.topic(suffix)

    async def one(old: dict[str, Any]) -> None:
        trajectory = trajectory_of(old)
        if not judging.applies(tasks.get(trajectory["task_id"])):
            comparison.not_applicable += 1
            on_progress(comparison.rescored + comparison.not_applicable, len(todo))
            return
        async with gate:
            score = await judging.score(tasks.get(trajectory["task_id"]), trajectory)
        new = scored_event(trajectory, score, detect_block(trajectory))
        new["ts"] = now_ms()
        # A re-scored topic is a copy of trajectories.scored's row: the same event type.
        producer.produce(topic, new["episode_id"], event_type("trajectories.scored"), new)
        producer.poll(0)
        reward_changed, verdicts_changed = compare(old, new)
        comparison.rescored += 1
        comparison.old_judges.add(f"{old['judge_name']}@{old['judge_version']}")
        comparison.new_judges.add(f"{new['judge_name']}@{new['judge_version']}")
        comparison.verdicts_changed += verdicts_changed
        comparison.judge_errors += new["judge_error"] is not None
        if reward_changed or verdicts_changed:
            comparison.changed_episodes.append(new["episode_id"])
        if reward_changed:
            comparison.rewards_changed += 1
            comparison.reward_changed_episodes.append(new["episode_id"])
            comparison.became_success += is_success(new) and not is_success(old)
            comparison.lost_success += is_success(old) and not is_success(new)
        on_progress(comparison.rescored + comparison.not_applicable, len(todo))

    await asyncio.gather(*(one(record) for record in todo))
