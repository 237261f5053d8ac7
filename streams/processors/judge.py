"""``webgym.trajectories`` -> the judge -> ``webgym.trajectories.scored``.

Runs ``judge_concurrency`` handlers at once, so a slow LLM judge never stalls the stream (Faust
commits an offset only when every earlier one is done). The score is stamped with the judge's name
and version; a judge error scores 0 and says why.
"""

from __future__ import annotations

from streams.filters import detect_block
from streams.judging import Judging, scored_event
from streams.orchestrator import Output


def register(streams, judging: Judging) -> None:
    @streams.agent(
        "trajectories",
        "trajectory",
        name="judge",
        concurrency=streams.settings.judge_concurrency,
    )
    async def judge(trajectory, event):
        task = await streams.task(trajectory["task_id"])
        score = await judging.score(task, trajectory)
        scored = scored_event(trajectory, score, detect_block(trajectory))
        await streams.send(
            [Output("trajectories.scored", "scored_trajectory", scored["episode_id"], scored)]
        )
