"""The latency-model policy: scripted actions that take as long as a VLM's inference.

For the rollout benchmark (issue 9). Consumes chat requests; produces replies that always parse
and depend only on (task, episode id, step), each held for the latency
:func:`agents.policy.workload.inference_latency_s` draws for (episode id, step);
``Generation.latency_ms`` is always that request's drawn latency, so a run's inference events can
be checked against the workload. A task with no known difficulty is refused with an error.
Cancellable: ``generate(requests, cancelled=event)`` returns as soon as ``event`` is set.
Asynchronous (``sync_batch=0``, the default) or lock-step batches (:class:`LockStep`).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin

from agents.policy.backends import ChatRequest, Generation
from agents.policy.workload import WorkloadSpec, episode_length, inference_latency_s
from schemas.event_ids import run_id_of
from schemas.prompt.reply import format_reply

log = logging.getLogger(__name__)

SCROLL_PX = 500
UNKNOWN_ANSWER = "I do not know this task's answer."
DEFAULT_SYNC_TIMEOUT_S = 60.0  # well inside the orchestrator's episode lease (120 s by default)


def batch_of(episode_id: str) -> str:
    """The run id of ``<run_id>-<n:06d>``: the synchronous batch an episode belongs to."""
    return run_id_of(episode_id)


class LatencyModelBackend:
    """Scripted replies held for a drawn latency.

    Each episode answers at the step :func:`agents.policy.workload.episode_length` draws for
    (episode id, its task's difficulty) (:meth:`length`, :meth:`_difficulty`).

    Actions (:meth:`_reply`): at step k below the episode's length L the policy opens the task's
    solution pages one per step (``extra_json.solution_urls``, a real page load on the task's own
    site, like a click on a link), then alternates scrolling down and up by 500 px (a real input
    event and a fresh screenshot, never leaving the page). At step L it answers the task's
    ``definite_answer`` (any text for an unknown task). Replies always parse and depend only on
    (task, episode id, step), so both modes of the benchmark make the browsers do the same work.

    Cancellable: ``generate(requests, cancelled=event)`` returns as soon as ``event`` is set,
    with replies its caller drops (the policy worker sets it at its inference timeout), so a
    timed-out call frees its thread at once. In synchronous mode only the final wait is cut
    short; the wait for the batch's members is bounded by ``sync_timeout_s``.

    Asynchronous mode (``sync_batch=0``, the default): each request sleeps its own draw; requests
    of one ``generate`` call run in parallel threads, so a call with several requests returns
    when its slowest is done. A policy worker must therefore use batches of one and enough
    concurrency for every episode in flight (``webgym worker policy --backend latency-model``
    does: batch size 1, concurrency 64), or a slow draw would delay the replies of other
    episodes. Synchronous mode (``sync_batch=N``): see :class:`LockStep`.
    """

    model = "latency-model"
    uses_weights = False  # scripted replies: no policy version produced them
    cancellable = True  # generate(requests, cancelled=event): see the class docstring

    def __init__(
        self,
        tasks: Mapping[str, dict[str, Any]],
        spec: WorkloadSpec | None = None,
        sync_batch: int = 0,
        sync_timeout_s: float = DEFAULT_SYNC_TIMEOUT_S,
    ):
        if sync_batch < 0:
            raise ValueError(f"sync_batch must be >= 0 (0 = asynchronous), got {sync_batch}")
        if sync_timeout_s <= 0:
            raise ValueError(f"sync_timeout_s must be > 0, got {sync_timeout_s}")
        self._tasks = tasks
        self.spec = spec or WorkloadSpec()
        self.sync_batch = sync_batch
        self._lock_step = LockStep(sync_batch, sync_timeout_s) if sync_batch else None

    def generate(
        self, requests: list[ChatRequest], cancelled: threading.Event | None = None
    ) -> list[Generation]:
        cancelled = cancelled or threading.Event()
        if len(requests) == 1:
            return [self._one(requests[0], cancelled)]
        # In parallel: in synchronous mode two requests of one call may wait for each other.
        with ThreadPoolExecutor(max_workers=len(requests)) as pool:
            return list(pool.map(lambda request: self._one(request, cancelled), requests))

    def length(self, task_id: str, episode_id: str) -> int:
        """The step at which ``episode_id`` (a try at ``task_id``) answers."""
        return episode_length(self.spec, episode_id, self._difficulty(task_id))

    def _difficulty(self, task_id: str) -> str:
        """The task record's ``difficulty``, or, for a task the backend was not given, the suffix
        of its id (practice-web ids end ``-easy|-medium|-hard``); a task with neither is refused
        with an error."""
        task = self._tasks.get(task_id)
        if task is not None and task.get("difficulty"):
            return task["difficulty"]
        suffix = task_id.rsplit("-", 1)[-1]
        if suffix in self.spec.horizons:
            return suffix
        raise ValueError(
            f"no difficulty for task {task_id!r}: not among the backend's tasks and its id does "
            f"not end with one of {', '.join(sorted(self.spec.horizons))}; give the worker the "
            "practice web the run samples from (--sites-count, --sites-seed)"
        )

    def _one(self, request: ChatRequest, cancelled: threading.Event) -> Generation:
        task_id = str(request.metadata.get("task_id") or "")
        episode_id = str(request.metadata.get("episode_id") or "")
        step = int(request.metadata.get("step", 1))
        length = self.length(task_id, episode_id)
        text = self._reply(self._tasks.get(task_id), step, length)
        latency_s = inference_latency_s(self.spec, episode_id, step)
        if self._lock_step is None:
            cancelled.wait(latency_s)
        else:
            self._lock_step.wait(
                batch_of(episode_id), episode_id, length, step, latency_s, cancelled
            )
        return Generation(text, [], [], latency_s * 1000, self.model)

    def _reply(self, task: dict[str, Any] | None, step: int, length: int) -> str:
        memory = f"step {step} of {length}"
        if step >= length:
            answer = task["definite_answer"] if task is not None else UNKNOWN_ANSWER
            action = {"kind": "answer", "text": answer}
            return format_reply(action, "I have everything for the answer.", "answer", memory)
        pages = []
        if task is not None:
            pages = [
                urljoin(task["start_url"], path)
                for path in json.loads(task.get("extra_json") or "{}").get("solution_urls", [])
            ]
        if step <= len(pages):
            action = {"kind": "navigate", "url": pages[step - 1]}
            return format_reply(action, "This page may show what I need.", "open it", memory)
        direction = "down" if (step - len(pages)) % 2 else "up"
        action = {"kind": "scroll", "direction": direction, "amount": SCROLL_PX}
        return format_reply(action, "Let me read further.", f"scroll {direction}", memory)


@dataclass
class _Batch:
    members: dict[str, int] = field(default_factory=dict)  # episode_id -> its length L
    closed: bool = False  # all members known (or a timeout gave up on the rest)
    dropped: set[str] = field(default_factory=set)  # timed out or extra: served alone
    asked: dict[int, dict[str, float]] = field(default_factory=dict)  # step -> episode -> draw
    release_at: dict[int, float] = field(default_factory=dict)  # step -> monotonic time


class LockStep:
    """The synchronous mode's barrier (``sync_batch=N``): lock-step batches of N episodes, as a
    synchronous rollout with a batched model would run them.

    - The batch of an episode is its run id (``<run_id>-<n:06d>`` without ``-<n>``); the
      benchmark gives each synchronous batch its own run id and N episodes.
    - The batch's members are the episodes that have asked anything; membership closes when N
      are known. An episode with length L is *live* at steps 1..L.
    - A request for (batch, step k) is held until membership is closed and every live member has
      asked for step k (at step 1 that is all N). At that moment ``t`` the step is released:
      every request of (batch, k), held or still to come, is answered at ``t + max(draws of the
      members that asked for step k)``. An episode that answered (k > L) is never waited for.
      Each reply's ``latency_ms`` is still its own draw; the barrier's wait shows in the event
      timestamps.
    - A request waits at most ``sync_timeout_s`` from its arrival. Then the step is released with
      the members that did ask; the members that did not (an aborted episode) are dropped from
      the batch and, like any episode arriving after membership closed, are served alone,
      unsynchronised, afterwards. Each such release is logged as a warning.
    - A re-delivered request of a released step is answered at the release time (at once if it
      has passed). Batches never wait for each other.

    The barrier lives in this process: in synchronous mode one policy worker must serve every
    episode of a batch (run one policy worker), with concurrency of at least N per batch in
    flight, since every held request occupies one of the worker's serving threads. The barrier's
    state (a few numbers per episode and step) is kept for the life of the process.
    """

    def __init__(self, size: int, timeout_s: float = DEFAULT_SYNC_TIMEOUT_S):
        if size < 1:
            raise ValueError(f"a lock-step batch needs >= 1 episode, got {size}")
        self.size = size
        self.timeout_s = timeout_s
        self._changed = threading.Condition()
        self._batches: dict[str, _Batch] = {}

    def wait(
        self,
        batch_id: str,
        episode_id: str,
        length: int,
        step: int,
        latency_s: float,
        cancelled: threading.Event | None = None,
    ) -> None:
        """Block until (batch_id, step) is released and its latency has passed (or, once
        released, until ``cancelled`` is set)."""
        deadline = time.monotonic() + self.timeout_s
        with self._changed:
            batch = self._batches.setdefault(batch_id, _Batch())
            if episode_id not in batch.members and not batch.closed:
                batch.members[episode_id] = length
                batch.closed = len(batch.members) >= self.size
            if episode_id not in batch.members and episode_id not in batch.dropped:
                batch.dropped.add(episode_id)
                log.warning(
                    "lock-step batch %s already has its %d episodes; %s is served alone",
                    batch_id,
                    self.size,
                    episode_id,
                )
            if episode_id in batch.dropped:
                release_at = time.monotonic() + latency_s  # outside the batch: unsynchronised
            else:
                if step not in batch.release_at:
                    batch.asked.setdefault(step, {})[episode_id] = latency_s
                    self._release_if_complete(batch, step)
                while step not in batch.release_at:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        self._release_on_timeout(batch_id, batch, step)
                        break
                    self._changed.wait(remaining)
                release_at = batch.release_at[step]
        (cancelled or threading.Event()).wait(max(0.0, release_at - time.monotonic()))

    def _live(self, batch: _Batch, step: int) -> set[str]:
        return {
            e for e, length in batch.members.items() if length >= step and e not in batch.dropped
        }

    def _release_if_complete(self, batch: _Batch, step: int) -> None:
        if batch.closed and self._live(batch, step) <= set(batch.asked[step]):
            self._release(batch, step)

    def _release_on_timeout(self, batch_id: str, batch: _Batch, step: int) -> None:
        missing = self._live(batch, step) - set(batch.asked.get(step, {}))
        unknown = 0 if batch.closed else self.size - len(batch.members)
        log.warning(
            "lock-step batch %s released step %d after %.0f s without %s%s; they are served "
            "alone from now on",
            batch_id,
            step,
            self.timeout_s,
            ", ".join(sorted(missing)) or "no known episode",
            f" and {unknown} episode(s) that never asked" if unknown else "",
        )
        batch.dropped |= missing
        batch.closed = True
        self._release(batch, step)

    def _release(self, batch: _Batch, step: int) -> None:
        draws = batch.asked.get(step, {}).values()
        batch.release_at[step] = time.monotonic() + max(draws, default=0.0)
        self._changed.notify_all()
