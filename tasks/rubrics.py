"""Rubrics for tasks that come without one: an LLM proposes the fact groups, strictly validated.

A task whose ``evaluator_reference`` is empty gets fact groups proposed by a model behind an
OpenAI-compatible API (:func:`generate_rubrics`). Guarantees: a reply is accepted only when it
validates (:func:`parse_rubric`); a task whose replies never validate is reported rejected with
the last reason, never given a bad rubric; a task with a bad ``extra_json`` is rejected too.
Tasks that already have a rubric are passed through unchanged (the same object). A generated
rubric is marked in ``extra_json`` as ``"rubric_source": "llm:<model>"``.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from infra.openai_client import json_fields, json_reply
from tasks.llm_client import LLMClient, LLMConfig, LLMRejected, LLMReplyError, as_client
from tasks.webgym_format import extra_of

log = logging.getLogger(__name__)

MAX_FACT_GROUPS = 8
MAX_FACTS_PER_GROUP = 10
_GROUP_ID = re.compile(r"g\d+")
_GROUP_KEYS = {"id", "description", "facts"}

SYSTEM_PROMPT = """\
You write the rubric of a task for a web agent. The agent gets the task's instruction, browses \
the website and gives a final answer. The rubric says what a correct final answer must contain, \
as fact groups: each group checks one part of the task and lists its facts, short statements \
that a judge can check against the final answer one by one.

Rules:
- 1 to 8 fact groups, with ids "g1", "g2", ... in order, each id once.
- Each group has a short description of what it checks and 1 to 10 facts.
- A fact is one checkable statement (e.g. "The answer gives the price of the Blue Kettle"); no \
fact twice.
- If a reference answer is given, the facts must agree with it.

Reply with ONE JSON object and nothing else, in exactly this form:
{"fact_groups": [{"id": "g1", "description": "...", "facts": ["...", "..."]}]}"""


class RubricRejected(NamedTuple):
    task_id: str
    reason: str


@dataclass
class RubricResult:
    """Every task of the input that has a rubric now, in input order, and those that do not."""

    tasks_with_rubrics: list[dict[str, Any]] = field(default_factory=list)
    rejected: list[RubricRejected] = field(default_factory=list)


def build_messages(task: dict[str, Any]) -> list[dict[str, Any]]:
    lines = [
        f"Instruction: {task['task_name']}",
        f"Website: {task.get('website') or ''}",
        f"Start page: {task.get('start_url') or ''}",
    ]
    reference = task.get("definite_answer")
    if reference and reference.strip():
        lines.append(f"Reference answer: {reference}")
    lines.append("Write the rubric.")
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": "\n".join(lines)},
    ]


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise LLMReplyError(f"{where} must be a JSON string, got {type(value).__name__}")
    if not value.strip():
        raise LLMReplyError(f"{where} is empty")
    return value.strip()


def parse_rubric(text: str) -> list[dict[str, Any]]:
    """The fact groups of a reply, validated; else :class:`LLMReplyError`.

    The reply must be one JSON object, alone or in one ```json block::

        {"fact_groups": [{"id": "g1", "description": "...", "facts": ["...", "..."]}, ...]}

    and is accepted only when: there are 1 to 8 fact groups; every group has exactly the keys
    ``id``, ``description`` and ``facts``; ids are strings ``g<number>``, each used once;
    descriptions are non-empty strings; every group has 1 to 10 facts, each a non-empty string;
    no fact appears twice in the rubric (compared case-insensitively, whitespace collapsed).
    Strings are stored stripped.
    """
    groups = json_reply(text, {"fact_groups"})["fact_groups"]
    if not isinstance(groups, list):
        raise LLMReplyError(f"fact_groups must be a JSON list, got {type(groups).__name__}")
    if not groups:
        raise LLMReplyError("fact_groups is empty; at least 1 fact group is needed")
    if len(groups) > MAX_FACT_GROUPS:
        raise LLMReplyError(
            f"fact_groups has {len(groups)} groups; at most {MAX_FACT_GROUPS} are allowed"
        )
    rubric: list[dict[str, Any]] = []
    seen_facts: dict[str, str] = {}  # normalised fact -> id of its group
    for index, group in enumerate(groups):
        where = f"fact_groups[{index}]"
        group = json_fields(group, where, _GROUP_KEYS, _GROUP_KEYS)
        group_id = group["id"]
        if not isinstance(group_id, str) or not _GROUP_ID.fullmatch(group_id):
            raise LLMReplyError(f"{where}.id {group_id!r} is not of the form g<number>")
        if any(g["id"] == group_id for g in rubric):
            raise LLMReplyError(f"fact group id {group_id!r} appears twice")
        description = _text(group["description"], f"{where}.description ({group_id})")
        facts = group["facts"]
        if not isinstance(facts, list):
            raise LLMReplyError(
                f"{where}.facts ({group_id}) must be a JSON list, got {type(facts).__name__}"
            )
        if not facts:
            raise LLMReplyError(f"{where} ({group_id}) has no facts; 1 to 10 are needed")
        if len(facts) > MAX_FACTS_PER_GROUP:
            raise LLMReplyError(
                f"{where} ({group_id}) has {len(facts)} facts; "
                f"at most {MAX_FACTS_PER_GROUP} are allowed"
            )
        clean = []
        for number, fact in enumerate(facts):
            fact = _text(fact, f"{where}.facts[{number}] ({group_id})")
            key = " ".join(fact.split()).casefold()
            if key in seen_facts:
                raise LLMReplyError(
                    f"fact {fact!r} appears twice (in {seen_facts[key]} and {group_id})"
                )
            seen_facts[key] = group_id
            clean.append(fact)
        rubric.append({"id": group_id, "description": description, "facts": clean})
    return rubric


def propose_rubric(task: dict[str, Any], llm: LLMClient) -> list[dict[str, Any]]:
    """Validated fact groups for ``task``; raises :class:`LLMRejected` when none came."""
    return llm.ask(build_messages(task), parse_rubric)


def _with_rubric(task: dict[str, Any], llm: LLMClient) -> dict[str, Any] | RubricRejected:
    try:
        extra = extra_of(task)
        rubric = propose_rubric(task, llm)
    except ValueError as exc:
        return RubricRejected(task["task_id"], str(exc))
    except LLMRejected as exc:
        log.warning("no rubric for task %s: %s", task["task_id"], exc.reason)
        return RubricRejected(task["task_id"], exc.reason)
    extra["rubric_source"] = llm.name
    return {
        **task,
        "evaluator_reference": rubric,
        "extra_json": json.dumps(extra, sort_keys=True, ensure_ascii=False),
    }


def generate_rubrics(
    tasks: Iterable[dict[str, Any]],
    client_or_config: LLMClient | LLMConfig,
    *,
    on_task: Callable[[str], None] | None = None,
) -> RubricResult:
    """Give every task without a rubric an LLM-proposed one.

    The model is asked from the task's instruction, website and (when there is one) definite
    answer. A rejected reply is retried (the model is shown its reply and the reason) up to
    ``max_attempts`` times; then the task is reported rejected with the last reason, never given
    a bad rubric. Tasks that already have a rubric are passed through unchanged (the same
    object). ``on_task(task_id)`` is called after each task, for progress display.

    Usage::

        from tasks.llm_client import LLMConfig
        from tasks.rubrics import generate_rubrics

        config = LLMConfig(base_url="http://127.0.0.1:8000/v1", model="Qwen/Qwen3-8B")
        result = generate_rubrics(tasks, config)
        for task_id, reason in result.rejected:
            print(f"{task_id}: {reason}")
        keep = result.tasks_with_rubrics
    """
    llm = as_client(client_or_config)
    result = RubricResult()
    for task in tasks:
        if task.get("evaluator_reference"):
            result.tasks_with_rubrics.append(task)
        else:
            outcome = _with_rubric(task, llm)
            if isinstance(outcome, RubricRejected):
                result.rejected.append(outcome)
            else:
                result.tasks_with_rubrics.append(outcome)
        if on_task is not None:
            on_task(task["task_id"])
    return result
