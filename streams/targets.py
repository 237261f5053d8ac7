"""What a run asks of the task sampler: ``target`` and ``stop`` events on ``webgym.curriculum``.

Every function sends one event keyed ``sampler`` and waits until the broker acknowledged it.
Runs are independent: a target or a stop names its run, and other runs on the same stack are left
alone. Workers (browser, policy, stream processors) must be running for episodes to go anywhere.
"""

from __future__ import annotations

from typing import Any

from infra.producer import EventProducer, now_ms
from infra.settings import Settings
from streams import curriculum
from tasks.publish import read_published_tasks
from tasks.sets import check_known, parse_weights, set_sizes


def start_sampling(
    settings: Settings,
    run_id: str,
    task_sets: dict[str, float] | str,
    in_flight: int,
    max_episodes: int | None = None,
    *,
    check: bool = True,
    **target: Any,
) -> None:
    """Tell the sampler to keep ``in_flight`` episodes of run ``run_id`` going, at most
    ``max_episodes`` in all, drawn only from ``task_sets`` (``{name: weight}`` or
    ``"NAME[=W],..."``). Sending it again for the same run changes that run's target. With
    ``check``, every set must hold tasks on the tasks topic (else
    :class:`tasks.sets.UnknownTaskSet`, naming the sets that exist).

    ``target`` holds the rest of the run's target, as :func:`streams.curriculum.target_event`
    takes it (``seed``, ``difficulty_ratios``, ``purpose``, ``pinned_version``, ``phase``):
    ``purpose="eval"`` marks every episode of the run held out (none reaches the learner, and the
    policy decodes greedily); ``pinned_version`` has them served by exactly that policy version;
    ``phase`` labels them (e.g. "warm_start", "on_policy")."""
    weights = parse_weights(task_sets) if isinstance(task_sets, str) else dict(task_sets)
    if check:
        check_known(weights, set_sizes(read_published_tasks(settings)))
    record = curriculum.target_event(
        run_id, weights, in_flight, max_episodes, now_ms=now_ms(), **target
    )
    _send(settings, record)


def send_stop(settings: Settings, run_id: str) -> None:
    """End the run's sampling: no episode of it starts after this (those in flight run on)."""
    _send(settings, curriculum.stop_event(run_id, now_ms=now_ms()))


def _send(settings: Settings, record: dict[str, Any]) -> None:
    producer = EventProducer.connect(settings, "webgym-run-target")
    producer.produce(settings.topic("curriculum"), curriculum.KEY, "curriculum", record)
    producer.flush()
