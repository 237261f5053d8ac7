"""The rollout benchmark's ideal: a zero-overhead discrete-event simulation of both rollout modes.

Given the episodes of a run (in start order), the workload (:mod:`agents.policy.workload`) and an
environment model, it replays the rollout on a virtual clock (a heapq event queue) twice:

- **asynchronous**: ``in_flight`` episodes run at once; the moment one ends, the next starts.
  Each episode on its own: first navigation (an environment operation), then for step
  k = 1 .. L: inference k, then, if k < L, one environment operation (the action and its
  screenshot); step L's action is the answer, which needs no environment operation.
- **synchronous**: batches of ``in_flight`` episodes in start order, in lock-step. The batch's
  first navigations start together and the batch waits for all of them; step k's inferences
  start together for every episode still running (L >= k), each followed by its environment
  operation if k < L, and the step ends when the slowest episode's inference and operation are
  done; an episode with L == k drops out after its answer. The next batch starts when the last
  episode of the batch ends.

What is modelled: each inference takes exactly its drawn latency
(:func:`~agents.policy.workload.inference_latency_s` of (episode key, step)); each environment
operation takes exactly ``env_step_s``; at most ``env_slots`` operations proceed at once (None:
no limit) and an operation that finds no free slot waits for one, first come first served.

What is not modelled: Kafka, serialisation and every other processing overhead (events take no
time to travel or handle); the policy never saturates (inference is unlimited in parallel, as
the latency-model policy is); environment operations never vary, fail or retry; no start-up,
judging or learning. So the figures are an upper bound on what a real run of the same episodes
can reach on an environment of that speed.

Guarantees: pure and deterministic (no I/O, no clock, no randomness beyond the workload's pure
draws): the same arguments give the same figures. Events at the same virtual time run in the
order they were scheduled.
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import json
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from agents.policy.workload import (
    WorkloadSpec,
    difficulty_of,
    episode_length,
    inference_latency_s,
)

MODES = ("async", "sync")


@dataclass(frozen=True)
class SimEpisode:
    key: str  # the episode key the workload draws from (latencies, length)
    difficulty: str  # one of the workload's horizons' names


@dataclass(frozen=True)
class SimResult:
    """One mode's figures. Busy fractions are shares of capacity over the wall time:

    - ``policy_busy_fraction``: inference-seconds / (wall_s * in_flight), i.e. the mean share of
      the in-flight episodes that are waiting on an inference (the rest wait on the environment,
      on a slot or, in the synchronous mode, on the batch's slowest episode);
    - ``env_busy_fraction``: operation-seconds / (wall_s * min(env_slots, in_flight)), with
      ``in_flight`` when ``env_slots`` is None (no more than ``in_flight`` operations can ever
      run at once). 0 when ``env_step_s`` is 0.
    """

    mode: str  # "async" or "sync"
    wall_s: float  # virtual time at which the last episode answered
    episodes: int
    steps: int  # inferences, one per step (sum of the episodes' lengths)
    steps_per_s: float
    episodes_per_hour: float
    policy_busy_fraction: float
    env_busy_fraction: float
    in_flight: int
    env_step_s: float
    env_slots: int | None
    inference_s: float  # sum of all inference latencies (the same in both modes)
    env_ops: int  # one navigation per episode and one action per step but the last: = steps
    env_wait_s: float  # total time operations queued for a free environment slot

    def figures(self) -> dict[str, Any]:
        """The figures as a JSON-friendly dict."""
        return asdict(self)


class _Clock:
    """A virtual clock with an event queue; ties run in scheduling order."""

    def __init__(self) -> None:
        self.now = 0.0
        self._queue: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()

    def after(self, delay_s: float, action: Callable[[], None]) -> None:
        heapq.heappush(self._queue, (self.now + delay_s, next(self._seq), action))

    def run(self) -> None:
        while self._queue:
            self.now, _, action = heapq.heappop(self._queue)
            action()


class _Environment:
    """Browser operations of ``step_s`` each, at most ``slots`` at once, FIFO for a slot."""

    def __init__(self, clock: _Clock, step_s: float, slots: int | None) -> None:
        self._clock = clock
        self._step_s = step_s
        self._free = slots
        self._waiting: deque[tuple[float, Callable[[], None]]] = deque()
        self.ops = 0
        self.wait_s = 0.0

    def operate(self, then: Callable[[], None]) -> None:
        """Run one operation as soon as a slot is free, then call ``then``."""
        if self._free is None or self._free > 0:
            self._start(self._clock.now, then)
        else:
            self._waiting.append((self._clock.now, then))

    def _start(self, requested_at: float, then: Callable[[], None]) -> None:
        if self._free is not None:
            self._free -= 1
        self.ops += 1
        self.wait_s += self._clock.now - requested_at

        def done() -> None:
            if self._free is not None:
                self._free += 1
                # The slot goes to the longest waiter before `then` can ask for another one.
                if self._waiting:
                    self._start(*self._waiting.popleft())
            then()

        self._clock.after(self._step_s, done)


class _Policy:
    """Unlimited parallel inference, each request taking its drawn latency."""

    def __init__(self, clock: _Clock, spec: WorkloadSpec) -> None:
        self._clock = clock
        self._spec = spec
        self.inference_s = 0.0

    def infer(self, episode_key: str, step: int, then: Callable[[], None]) -> None:
        latency_s = inference_latency_s(self._spec, episode_key, step)
        self.inference_s += latency_s
        self._clock.after(latency_s, then)


@dataclass(frozen=True)
class _World:
    """What a rollout mode drives: the virtual clock, the environment and the policy."""

    clock: _Clock
    env: _Environment
    policy: _Policy


# The episodes with their lengths, in start order.
_Runs = Sequence[tuple[SimEpisode, int]]


def _run_async(runs: _Runs, in_flight: int, world: _World) -> None:
    env, policy = world.env, world.policy
    queue = deque(runs)

    def start_next() -> None:
        if queue:
            run_episode(*queue.popleft())

    def run_episode(episode: SimEpisode, length: int) -> None:
        def step(k: int) -> None:
            def after_inference() -> None:
                if k == length:
                    start_next()
                else:
                    env.operate(lambda: step(k + 1))

            policy.infer(episode.key, k, after_inference)

        env.operate(lambda: step(1))

    for _ in range(min(in_flight, len(queue))):
        start_next()
    world.clock.run()


def _run_sync(runs: _Runs, in_flight: int, world: _World) -> None:
    env, policy = world.env, world.policy
    batches = [runs[i : i + in_flight] for i in range(0, len(runs), in_flight)]

    def barrier(count: int, then: Callable[[], None]) -> Callable[[], None]:
        left = [count]

        def arrive() -> None:
            left[0] -= 1
            if left[0] == 0:
                then()

        return arrive

    def run_batch(b: int) -> None:
        if b == len(batches):
            return
        batch = batches[b]

        def step(k: int) -> None:
            running = [(e, n) for e, n in batch if n >= k]
            if not running:
                run_batch(b + 1)
                return
            arrive = barrier(len(running), lambda: step(k + 1))
            for episode, length in running:
                if k == length:
                    policy.infer(episode.key, k, arrive)
                else:
                    policy.infer(episode.key, k, lambda: env.operate(arrive))

        arrive_navigated = barrier(len(batch), lambda: step(1))
        for _ in batch:
            env.operate(arrive_navigated)

    run_batch(0)
    world.clock.run()


def simulate(
    mode: str,
    episodes: Sequence[SimEpisode],
    spec: WorkloadSpec,
    in_flight: int = 32,
    env_step_s: float = 0.0,
    env_slots: int | None = None,
) -> SimResult:
    """Simulate one mode (``"async"`` or ``"sync"``) over ``episodes`` in the order given."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if not episodes:
        raise ValueError("no episodes to simulate; pass at least one SimEpisode")
    if in_flight < 1:
        raise ValueError(f"in_flight must be >= 1, got {in_flight}")
    if env_step_s < 0:
        raise ValueError(f"env_step_s must be >= 0, got {env_step_s}")
    if env_slots is not None and env_slots < 1:
        raise ValueError(f"env_slots must be >= 1 or None (no limit), got {env_slots}")
    lengths = [episode_length(spec, e.key, e.difficulty) for e in episodes]
    clock = _Clock()
    env = _Environment(clock, env_step_s, env_slots)
    policy = _Policy(clock, spec)
    run = _run_async if mode == "async" else _run_sync
    run(list(zip(episodes, lengths, strict=True)), in_flight, _World(clock, env, policy))

    wall_s = clock.now
    steps = sum(lengths)
    env_capacity = in_flight if env_slots is None else min(env_slots, in_flight)
    return SimResult(
        mode=mode,
        wall_s=wall_s,
        episodes=len(episodes),
        steps=steps,
        steps_per_s=_ratio(steps, wall_s),
        episodes_per_hour=_ratio(3600 * len(episodes), wall_s),
        policy_busy_fraction=_ratio(policy.inference_s, wall_s * in_flight),
        env_busy_fraction=_ratio(env.ops * env_step_s, wall_s * env_capacity),
        in_flight=in_flight,
        env_step_s=env_step_s,
        env_slots=env_slots,
        inference_s=policy.inference_s,
        env_ops=env.ops,
        env_wait_s=env.wait_s,
    )


def _ratio(numerator: float, denominator: float) -> float:
    # A workload of zero latencies and a zero-time environment takes no time at all.
    return numerator / denominator if denominator > 0 else float("inf")


def simulate_both(
    episodes: Sequence[SimEpisode],
    spec: WorkloadSpec,
    in_flight: int = 32,
    env_step_s: float = 0.0,
    env_slots: int | None = None,
) -> dict[str, Any]:
    """Both modes over the same episodes: ``{"async": figures, "sync": figures,
    "async_over_sync": throughput ratio}`` (steps per second; both modes run the same steps)."""
    results = {
        mode: simulate(mode, episodes, spec, in_flight, env_step_s, env_slots) for mode in MODES
    }
    return {
        "async": results["async"].figures(),
        "sync": results["sync"].figures(),
        "async_over_sync": _ratio(results["async"].steps_per_s, results["sync"].steps_per_s),
    }


def default_episodes(spec: WorkloadSpec, count: int, prefix: str = "sim") -> list[SimEpisode]:
    """``count`` episodes keyed ``{prefix}-0000`` ... with :func:`difficulty_of`'s task mix."""
    keys = [f"{prefix}-{i:04d}" for i in range(count)]
    return [SimEpisode(key, difficulty_of(spec, key)) for key in keys]


def main() -> None:
    parser = argparse.ArgumentParser(
        description="Print the ideal (zero-overhead) figures of both rollout modes as JSON."
    )
    parser.add_argument("--episodes", type=int, default=256)
    parser.add_argument("--in-flight", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--median-s", type=float, default=1.5, help="inference latency median")
    parser.add_argument(
        "--sigma", type=float, default=0.7, help="inference latency lognormal sigma"
    )
    parser.add_argument("--env-step-s", type=float, default=0.0, help="seconds per browser op")
    parser.add_argument("--env-slots", type=int, default=None, help="browser ops at once")
    args = parser.parse_args()
    spec = WorkloadSpec(seed=args.seed, median_s=args.median_s, sigma=args.sigma)
    figures = simulate_both(
        default_episodes(spec, args.episodes), spec, args.in_flight, args.env_step_s, args.env_slots
    )
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
