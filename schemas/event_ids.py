"""Deterministic event ids: every one is built here, and parsed only here.

Consumers are idempotent on ``event_id``, so a re-sent event must carry the id of its first
send: an id is a function of what the event is, never of when or where it was made.

- an episode's step events: ``<episode_id>:<step>:<kind>`` (navigate, observation, infer,
  inference, act);
- an episode's other events and the decisions applied to it: ``<episode_id>:<kind>`` (started,
  end, ended, trajectory, scored, success, site_blocked; the timer's deadline and lease);
- a task: ``task:<task_id>``; a policy version: ``policy:<policy_name>:v<version>``.

Episode ids themselves are ``<run_id>-<n:06d>`` (:func:`new_episode_id`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

StepKind = Literal["navigate", "observation", "infer", "inference", "act"]
EpisodeKind = Literal[
    "started",
    "end",
    "ended",
    "trajectory",
    "scored",
    "success",
    "site_blocked",
    "deadline",
    "lease",
]
TIMER_KINDS: tuple[EpisodeKind, ...] = ("deadline", "lease")  # decisions the lease timer makes


@dataclass(frozen=True)
class EpisodeEventId:
    episode_id: str
    kind: str
    step: int | None = None  # None: an event of the episode as a whole


def new_episode_id(run_id: str, number: int) -> str:
    """``<run_id>-<n:06d>``: the ``number``-th episode a run starts (the run that started the
    episode, and its number in that run)."""
    return f"{run_id}-{number:06d}"


def run_id_of(episode_id: str) -> str:
    """The run that started ``episode_id`` (the part before its last ``-``)."""
    return episode_id.rpartition("-")[0]


def step_event_id(episode_id: str, step: int, kind: StepKind) -> str:
    """``<episode_id>:<step>:<kind>``: the event of one step of an episode."""
    return f"{episode_id}:{step}:{kind}"


def episode_event_id(episode_id: str, kind: EpisodeKind) -> str:
    """``<episode_id>:<kind>``: an event of the episode as a whole."""
    return f"{episode_id}:{kind}"


def task_event_id(task_id: str) -> str:
    return f"task:{task_id}"


def policy_version_event_id(policy_name: str, version: int) -> str:
    return f"policy:{policy_name}:v{version}"


def parse_episode_event_id(event_id: str) -> EpisodeEventId:
    """The parts of a step or episode event id; ``ValueError`` for any other string.

    An id splits from the right: an episode id (``<run_id>-<n>``) ends in no ``:<number>``.
    """
    head, sep, kind = event_id.rpartition(":")
    if not sep or not head or not kind:
        raise ValueError(f"not an episode event id: {event_id!r}")
    episode_id, sep, step = head.rpartition(":")
    if sep and step.isdigit():
        return EpisodeEventId(episode_id, kind, int(step))
    return EpisodeEventId(head, kind)


def is_timer_decision(event_id: str) -> bool:
    """Whether ``event_id`` names a decision of the lease timer (deadline or lease expired)."""
    try:
        parsed = parse_episode_event_id(event_id)
    except ValueError:
        return False
    return parsed.step is None and parsed.kind in TIMER_KINDS
