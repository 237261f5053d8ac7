"""Which judge scores a trajectory, and the scored event it becomes.

Practice-web tasks (``extra_json.source == "practice-web"``) have ground truth: the deterministic
verifier of ``sites.verifier`` scores them. MiniWoB++ tasks (``"miniwob"``) are scored by the page's
own reward signal. Other tasks go to the LLM rubric judge when one is
configured (``WEBGYM_JUDGE_BASE_URL`` and ``WEBGYM_JUDGE_MODEL``); without one, or for an unknown
task, the score is a judge error (reward 0), never a guess. Every score names its judge and version.
A judge endpoint that refuses the client (bad key, no permission, unknown model) is logged as an
error and recorded on each score as a judge error: the stream never stops on a judge.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from infra.log_reader import EventUnavailable, OffsetFetcher
from infra.screenshot_store import ScreenshotStore
from infra.settings import Settings
from schemas.event_ids import episode_event_id
from sites.verifier import JUDGE_NAME, JUDGE_VERSION, SiteCatalogues, verify
from streams.judges import Judge, Score
from tasks.miniwob import JUDGE_NAME as MINIWOB_JUDGE_NAME
from tasks.miniwob import JUDGE_VERSION as MINIWOB_JUDGE_VERSION
from tasks.miniwob import page_reward

log = logging.getLogger(__name__)


class PracticeWebJudge:
    """The deterministic verifier: facts in the answer, required pages visited, no credit for an
    over-long answer, one that lists candidates or one that copies a page's values (the last two
    checked against the catalogue of the task's site, regenerated from the task's seed once per
    seed and kept by this judge)."""

    name = JUDGE_NAME
    version = JUDGE_VERSION

    def __init__(self, catalogues: SiteCatalogues | None = None):
        self.catalogues = catalogues or SiteCatalogues()

    async def score(
        self, task: dict[str, Any], trajectory: dict[str, Any], screenshots: list[bytes]
    ) -> Score:
        visited = [step["url"] for step in trajectory["steps"] if step.get("url")]
        if trajectory.get("final_url"):
            visited.append(trajectory["final_url"])
        # The first task of a seed regenerates its sites (a fraction of a second): off the loop.
        catalogue = await asyncio.to_thread(self.catalogues.for_task, task)
        verdict = verify(task, trajectory.get("final_answer"), visited, catalogue)
        return Score(verdict.reward, self.name, self.version, verdict.verdicts)


class MiniWoBJudge:
    """The MiniWoB++ page's own reward signal, as the last observation carried it."""

    name = MINIWOB_JUDGE_NAME
    version = MINIWOB_JUDGE_VERSION

    async def score(
        self, task: dict[str, Any], trajectory: dict[str, Any], screenshots: list[bytes]
    ) -> Score:
        reward, rationale = page_reward(dict(trajectory.get("final_page_signals") or {}))
        verdicts = [
            {
                "fact_group_id": group["id"],
                "fact": fact,
                "satisfied": reward >= 1.0,
                "rationale": rationale,
            }
            for group in task["evaluator_reference"]
            for fact in group["facts"]
        ]
        return Score(reward, self.name, self.version, verdicts)


def task_source(task: dict[str, Any]) -> str:
    try:
        return json.loads(task.get("extra_json") or "{}").get("source", "")
    except json.JSONDecodeError:
        return ""


class Judging:
    """Routes each task to its judge; ``only`` ("verifier", "miniwob" or "llm") sends every task
    to that one judge instead (``webgym rescore --judge``)."""

    def __init__(
        self,
        settings: Settings,
        reader: OffsetFetcher | None = None,  # of observations
        only: str | None = None,
    ):
        if only not in (None, "verifier", "miniwob", "llm"):
            raise ValueError(f"unknown judge {only!r}: choose verifier, miniwob or llm")
        self.only = only
        self.verifier = PracticeWebJudge()
        self.miniwob = MiniWoBJudge()
        self.llm: Judge | None = None
        if settings.judge_base_url and settings.judge_model:
            # The OpenAI SDK takes a second to import: only a worker with an LLM judge loads it.
            from infra.openai_client import ChatEndpoint
            from streams.judges.llm import LLMRubricJudge

            key = settings.judge_api_key.get_secret_value() if settings.judge_api_key else None
            endpoint = ChatEndpoint(
                settings.judge_base_url,
                settings.judge_model,
                api_key=key,
                max_tokens=settings.judge_max_tokens,
            )
            self.llm = LLMRubricJudge(endpoint)
        self._reader = reader
        self._store = ScreenshotStore(settings)  # observations that keep theirs in MinIO
        self._settings = settings

    def applies(self, task: dict[str, Any] | None) -> bool:
        """Whether the chosen judge can score this task at all: the verifier needs a practice-web
        task's ground truth and the page reward a MiniWoB++ page; the rubric judge reads any
        task. Routing by source (``only`` None) always applies."""
        if self.only is None or self.only == "llm" or task is None:
            return True
        return task_source(task) == {"verifier": "practice-web", "miniwob": "miniwob"}[self.only]

    def judge_for(self, task: dict[str, Any]) -> Judge | None:
        if self.only is not None:
            return {"verifier": self.verifier, "miniwob": self.miniwob, "llm": self.llm}[self.only]
        source = task_source(task)
        if source == "practice-web":
            return self.verifier
        if source == "miniwob":
            return self.miniwob
        return self.llm

    async def score(self, task: dict[str, Any] | None, trajectory: dict[str, Any]) -> Score:
        if task is None:
            return Score.error("none", "0", f"unknown task {trajectory['task_id']!r}")
        judge = self.judge_for(task)
        if judge is None:
            return Score.error(
                "none",
                "0",
                f"no judge for tasks of source {task_source(task) or 'unknown'!r}: set "
                "WEBGYM_JUDGE_BASE_URL and WEBGYM_JUDGE_MODEL for the LLM rubric judge",
            )
        screenshots: list[bytes] = []
        if judge is self.llm and trajectory.get("final_answer") is not None:
            try:
                screenshots = await asyncio.to_thread(self._screenshots, trajectory)
            except EventUnavailable as error:
                return Score.error(judge.name, judge.version, f"screenshots unavailable: {error}")
        try:
            return await judge.score(task, trajectory, screenshots)
        except Exception as error:
            if judge is not self.llm or not _refuses_us(error):
                raise
            # The judge refuses us (key, permission, model name): every trajectory would fail
            # the same way. Record it on the score, where `webgym rescore` can redo it, and say
            # loudly what to fix; the stream itself goes on.
            log.error("the judge %s refuses requests: %s; fix WEBGYM_JUDGE_*", judge.name, error)
            problem = f"judge configuration error ({type(error).__name__}): {error}"
            return Score.error(judge.name, judge.version, problem[:2000])

    def _screenshots(self, trajectory: dict[str, Any], k: int = 3) -> list[bytes]:
        if self._reader is None:
            self._reader = OffsetFetcher(self._settings, "observations")
        seen, shots = set(), []
        for step in trajectory["steps"][::-1]:
            if step["observation_event_id"] in seen:
                continue
            seen.add(step["observation_event_id"])
            record = self._reader.fetch(
                step["observation_partition"],
                step["observation_offset"],
                step["observation_event_id"],
            )
            shots.append(self._store.image(record))  # inline or in MinIO
            if len(shots) == k:
                break
        return shots[::-1]


def _refuses_us(error: Exception) -> bool:
    """Whether the LLM judge's endpoint refuses us (key, permission, model name), not the
    trajectory; asked only of the LLM judge, which has loaded the client already."""
    from infra.openai_client import CONFIGURATION_ERRORS

    return isinstance(error, CONFIGURATION_ERRORS)


def scored_event(trajectory: dict[str, Any], score: Score, block_reason: str | None) -> dict:
    return {
        **trajectory,
        "event_id": episode_event_id(trajectory["episode_id"], "scored"),
        "reward": score.reward,
        "verdicts": score.verdicts,
        "judge_name": score.judge_name,
        "judge_version": score.judge_version,
        "judge_error": score.judge_error,
        "blocked": block_reason is not None,
        "block_reason": block_reason,
    }
