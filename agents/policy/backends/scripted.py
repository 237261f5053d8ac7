"""A scripted policy that reads the ground truth of practice-web tasks.

It opens the task's solution pages one step at a time (``extra_json.solution_urls``), then
answers the task's ``definite_answer``, in the reply format the real policy must use. With
``error_rate`` > 0 a step goes wrong with that probability: a click at a random point instead of
the next page, or a wrong final answer, so the pipeline also sees failures. Deterministic for a
given seed, episode and step. Used to seed successful trajectories and to test the loop end to end.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import urljoin

from agents.policy.backends import ChatRequest, Generation
from schemas.prompt.reply import format_reply

WRONG_ANSWER = "I could not find the answer."


class ScriptedBackend:
    model = "scripted"
    uses_weights = False  # ground truth, not weights: no policy version produced its replies

    def __init__(self, tasks: Mapping[str, dict[str, Any]], error_rate: float = 0.0, seed: int = 0):
        if not 0.0 <= error_rate <= 1.0:
            raise ValueError(f"error_rate must be within 0-1, got {error_rate}")
        self._tasks = tasks
        self._error_rate = error_rate
        self._seed = seed

    def generate(self, requests: list[ChatRequest]) -> list[Generation]:
        return [self._one(request) for request in requests]

    def _one(self, request: ChatRequest) -> Generation:
        started = time.perf_counter()
        task_id, step = request.metadata.get("task_id"), int(request.metadata.get("step", 1))
        task = self._tasks.get(task_id or "")
        if task is None:
            text = f"Thought: I have no script for task {task_id!r}.\nAction: none"
        else:
            text = self._reply(task, request.metadata.get("episode_id", ""), step)
        return Generation(text, [], [], (time.perf_counter() - started) * 1000, self.model)

    def _reply(self, task: dict[str, Any], episode_id: str, step: int) -> str:
        plan = [
            urljoin(task["start_url"], path)
            for path in json.loads(task["extra_json"]).get("solution_urls", [])
        ]
        digest = hashlib.sha256(f"{self._seed}:{episode_id}:{step}".encode()).digest()
        chance = random.Random(digest)
        wrong = chance.random() < self._error_rate
        memory = f"opened {min(step - 1, len(plan))} of {len(plan)} pages that show the answer"
        if step <= len(plan):
            if wrong:
                action = {
                    "kind": "left_click",
                    "x": chance.randint(0, 1000),
                    "y": chance.randint(0, 1000),
                }
                return format_reply(action, "Let me look around.", "click somewhere", memory)
            action = {"kind": "navigate", "url": plan[step - 1]}
            return format_reply(action, "This page shows what I need.", "open it", memory)
        answer = WRONG_ANSWER if wrong else task["definite_answer"]
        action = {"kind": "answer", "text": answer}
        return format_reply(action, "I have everything for the answer.", "answer", memory)
