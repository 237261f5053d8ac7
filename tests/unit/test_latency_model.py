"""The latency-model policy: valid scripted steps, the workload's draws, async and lock-step timing.

Timings are checked as relations (who was answered before whom, never before the drawn latency),
with tiny medians so the tests take well under a second each.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from urllib.parse import urlsplit

import pytest
from typer.testing import CliRunner

from agents.policy.backends import ChatRequest
from agents.policy.backends.latency_model import UNKNOWN_ANSWER, LatencyModelBackend, batch_of
from agents.policy.main import BackendOptions, backend_factory, serving_shape
from agents.policy.workload import WorkloadSpec, episode_length, inference_latency_s
from commands.main import app
from schemas.prompt.reply import ParsedReply, parse_reply
from sites import generate_sites
from sites.tasks import generate_tasks

TASKS = {t["task_id"]: t for t in generate_tasks(generate_sites(seed=0, count=2), per_site=6)}
SHORT = {"easy": 3, "medium": 5, "hard": 7}  # short horizons keep lock-step tests quick
SLACK_S = 0.002  # clock granularity between time.monotonic readings in different threads


def _request(task_id: str, episode_id: str, step: int) -> ChatRequest:
    return ChatRequest([], {"task_id": task_id, "episode_id": episode_id, "step": step})


def _ask(backend: LatencyModelBackend, task_id: str, episode_id: str, step: int):
    return backend.generate([_request(task_id, episode_id, step)])[0]


# -- replies ------------------------------------------------------------------------------------


@pytest.mark.parametrize("task_id", sorted(TASKS))
def test_replies_are_valid_steps_on_the_task_site_then_the_answer_at_its_length(task_id):
    task = TASKS[task_id]
    backend = LatencyModelBackend(TASKS, WorkloadSpec(median_s=0.0))
    episode_id = f"run-{task_id}-000001"
    length = episode_length(backend.spec, episode_id, task["difficulty"])
    assert backend.length(task_id, episode_id) == length
    host = urlsplit(task["start_url"]).hostname
    for step in range(1, length + 1):
        parsed = parse_reply(_ask(backend, task_id, episode_id, step).text)
        assert isinstance(parsed, ParsedReply), parsed
        action = parsed.action
        if step < length:
            assert action["kind"] in ("navigate", "scroll")
            if action["kind"] == "navigate":
                assert urlsplit(action["url"]).hostname == host
        else:
            assert action == {"kind": "answer", "text": task["definite_answer"]}
    # Deterministic: the same step gets the same reply.
    assert _ask(backend, task_id, episode_id, 1).text == _ask(backend, task_id, episode_id, 1).text


def test_lengths_follow_the_difficulty_and_spread():
    backend = LatencyModelBackend({}, WorkloadSpec(median_s=0.0))
    for difficulty, horizon in backend.spec.horizons.items():
        lengths = {backend.length(f"x-001-{difficulty}", f"run-{n:06d}") for n in range(200)}
        assert max(lengths) <= horizon and min(lengths) >= 1 and len(lengths) > horizon // 2


def test_past_the_solution_pages_it_scrolls_down_and_up():
    backend = LatencyModelBackend({}, WorkloadSpec(median_s=0.0, horizons={"hard": 30}))
    episode_id = next(
        f"r-{n:06d}" for n in range(100) if backend.length("t-hard", f"r-{n:06d}") > 3
    )
    kinds = [
        parse_reply(_ask(backend, "t-hard", episode_id, step).text).action for step in (1, 2, 3)
    ]
    assert [(a["kind"], a["direction"]) for a in kinds] == [
        ("scroll", "down"),
        ("scroll", "up"),
        ("scroll", "down"),
    ]


def test_an_unknown_task_uses_its_id_for_the_difficulty_or_is_refused():
    backend = LatencyModelBackend({}, WorkloadSpec(median_s=0.0))
    length = backend.length("elsewhere-007-medium", "run-000003")
    reply = parse_reply(_ask(backend, "elsewhere-007-medium", "run-000003", length).text)
    assert reply.action == {"kind": "answer", "text": UNKNOWN_ANSWER}
    with pytest.raises(ValueError, match="no difficulty for task 'mystery'"):
        _ask(backend, "mystery", "run-000003", 1)


# -- latency ------------------------------------------------------------------------------------


def test_each_reply_takes_and_reports_the_drawn_latency():
    spec = WorkloadSpec(seed=4, median_s=0.01)
    backend = LatencyModelBackend(TASKS, spec)
    task_id = sorted(TASKS)[0]
    for step in (1, 2, 3):
        started = time.monotonic()
        generation = _ask(backend, task_id, "run-000009", step)
        elapsed = time.monotonic() - started
        drawn = inference_latency_s(spec, "run-000009", step)
        assert generation.latency_ms == pytest.approx(drawn * 1000)
        assert elapsed >= drawn - SLACK_S
        assert generation.model == "latency-model"


def _episode_with_draw(spec: WorkloadSpec, accept) -> str:
    return next(
        f"run-{n:06d}"
        for n in range(10_000)
        if accept(inference_latency_s(spec, f"run-{n:06d}", 1))
    )


def test_async_a_slow_draw_does_not_delay_another_request():
    spec = WorkloadSpec(median_s=0.05, sigma=0.7)
    backend = LatencyModelBackend({}, spec)
    slow = _episode_with_draw(spec, lambda s: 0.4 <= s <= 0.8)
    fast = _episode_with_draw(spec, lambda s: s <= 0.03)
    done: dict[str, float] = {}
    started = time.monotonic()

    def ask(episode_id: str) -> None:
        _ask(backend, "t-easy", episode_id, 1)
        done[episode_id] = time.monotonic() - started

    threads = [threading.Thread(target=ask, args=(e,)) for e in (slow, fast)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert done[fast] < done[slow]
    assert done[fast] < inference_latency_s(spec, slow, 1)  # not held behind the slow one
    assert done[slow] >= inference_latency_s(spec, slow, 1) - SLACK_S


def test_a_call_with_several_requests_sleeps_them_in_parallel():
    spec = WorkloadSpec(median_s=0.05, sigma=0.7)
    backend = LatencyModelBackend({}, spec)
    chosen = [
        f"run-{n:06d}"
        for n in range(10_000)
        if 0.2 <= inference_latency_s(spec, f"run-{n:06d}", 1) <= 0.4
    ][:4]
    started = time.monotonic()
    generations = backend.generate([_request("t-easy", e, 1) for e in chosen])
    elapsed = time.monotonic() - started
    draws = [inference_latency_s(spec, e, 1) for e in chosen]
    assert [g.latency_ms for g in generations] == pytest.approx([d * 1000 for d in draws])
    assert max(draws) - SLACK_S <= elapsed < sum(draws) / 2


# -- lock-step ----------------------------------------------------------------------------------


TASK_OF = ["t-001-easy", "t-002-medium", "t-003-hard"]


def _batch_with_distinct_lengths(spec: WorkloadSpec, prefix: str) -> tuple[str, list[str]]:
    """A run id whose three episodes (easy, medium, hard) answer at three different steps."""
    for n in range(1000):
        run_id = f"{prefix}{n}"
        episodes = [f"{run_id}-{i:06d}" for i in range(3)]
        lengths = [
            episode_length(spec, e, t.rsplit("-", 1)[1])
            for e, t in zip(episodes, TASK_OF, strict=True)
        ]
        if len(set(lengths)) == 3 and min(lengths) >= 2:
            return run_id, episodes
    raise AssertionError("no batch with three lengths")


class Episode(threading.Thread):
    """Asks step after step until it answers, after a random "browser" delay each time."""

    def __init__(self, backend, task_id, episode_id, seed, start_gate=None):
        super().__init__(daemon=True)
        self.backend, self.task_id, self.episode_id = backend, task_id, episode_id
        self.jitter = random.Random(seed)
        self.start_gate = start_gate
        self.asked: dict[int, float] = {}
        self.answered: dict[int, float] = {}

    def run(self) -> None:
        if self.start_gate is not None:
            self.start_gate.wait()
        step = 1
        while True:
            time.sleep(self.jitter.uniform(0.0, 0.03))
            self.asked[step] = time.monotonic()
            reply = _ask(self.backend, self.task_id, self.episode_id, step)
            self.answered[step] = time.monotonic()
            if parse_reply(reply.text).action["kind"] == "answer":
                return
            step += 1


def _run_batch(backend, episodes, start_gate=None) -> list[Episode]:
    runners = [
        Episode(backend, task_id, episode_id, seed, start_gate)
        for seed, (task_id, episode_id) in enumerate(zip(TASK_OF, episodes, strict=True))
    ]
    for runner in runners:
        runner.start()
    return runners


def _check_lock_step(backend, runners: list[Episode]) -> None:
    spec = backend.spec
    lengths = {r.episode_id: backend.length(r.task_id, r.episode_id) for r in runners}
    for runner in runners:
        assert max(runner.answered) == lengths[runner.episode_id]  # answered at its length
    for step in range(1, max(lengths.values()) + 1):
        live = [r for r in runners if lengths[r.episode_id] >= step]
        last_asked = max(r.asked[step] for r in live)
        slowest = max(inference_latency_s(spec, r.episode_id, step) for r in live)
        for runner in live:
            # Nobody is answered before every live episode asked, plus the slowest draw.
            assert runner.answered[step] >= last_asked + slowest - SLACK_S, (runner, step)
        answered = [r.answered[step] for r in live]
        assert max(answered) - min(answered) < 0.25  # together (generous: threads, a busy CI)


def test_sync_every_step_waits_for_the_live_episodes_of_the_batch_only(caplog):
    spec = WorkloadSpec(seed=1, median_s=0.01, horizons=SHORT)
    backend = LatencyModelBackend({}, spec, sync_batch=3, sync_timeout_s=30.0)
    _, episodes = _batch_with_distinct_lengths(spec, "sync")
    with caplog.at_level(logging.WARNING):
        runners = _run_batch(backend, episodes)
        for runner in runners:
            runner.join(timeout=20)
            assert not runner.is_alive()
    _check_lock_step(backend, runners)
    assert not caplog.records  # no step needed the timeout: finished episodes were not awaited


def test_sync_batches_do_not_block_each_other():
    spec = WorkloadSpec(seed=2, median_s=0.01, horizons=SHORT)
    backend = LatencyModelBackend({}, spec, sync_batch=3, sync_timeout_s=30.0)
    _, first = _batch_with_distinct_lengths(spec, "first")
    _, second = _batch_with_distinct_lengths(spec, "second")
    assert batch_of(first[0]) != batch_of(second[0])
    # Two episodes of the second batch ask for step 1 and are held: their third has not asked.
    held = [
        Episode(backend, t, e, 9 + i)
        for i, (t, e) in enumerate(zip(TASK_OF[:2], second[:2], strict=True))
    ]
    for runner in held:
        runner.start()
    time.sleep(0.05)
    runners = _run_batch(backend, first)
    for runner in runners:
        runner.join(timeout=20)
        assert not runner.is_alive()  # the first batch finished while the second waited
    _check_lock_step(backend, runners)
    assert all(1 in r.asked and 1 not in r.answered for r in held)
    late = Episode(backend, TASK_OF[2], second[2], 11)
    late.start()
    for runner in [*held, late]:
        runner.join(timeout=20)
        assert not runner.is_alive()
    _check_lock_step(backend, [*held, late])
    assert min(r.answered[1] for r in held) >= late.asked[1] - SLACK_S


def test_sync_an_episode_that_never_asks_is_dropped_after_the_timeout(caplog):
    spec = WorkloadSpec(seed=3, median_s=0.01, horizons=SHORT)
    backend = LatencyModelBackend({}, spec, sync_batch=3, sync_timeout_s=0.3)
    _, episodes = _batch_with_distinct_lengths(spec, "gone")
    # The third episode asks once (it is a member), then vanishes (say its browser crashed).
    with caplog.at_level(logging.WARNING):
        threading.Thread(
            target=_ask, args=(backend, TASK_OF[2], episodes[2], 1), daemon=True
        ).start()
        runners = [
            Episode(backend, t, e, i)
            for i, (t, e) in enumerate(zip(TASK_OF[:2], episodes[:2], strict=True))
        ]
        for runner in runners:
            runner.start()
        for runner in runners:
            runner.join(timeout=20)
            assert not runner.is_alive()
    # Step 2 was released by the timeout, once: later steps did not wait for the vanished one.
    assert min(r.answered[2] for r in runners) - min(r.asked[2] for r in runners) >= 0.3 - SLACK_S
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and episodes[2] in warnings[0] and "step 2" in warnings[0]
    # Should it come back, it is served alone, at once.
    started = time.monotonic()
    _ask(backend, TASK_OF[2], episodes[2], 2)
    assert time.monotonic() - started < 0.25


# -- wiring -------------------------------------------------------------------------------------


def test_the_worker_serves_one_request_per_call_and_enough_at_once():
    assert serving_shape(BackendOptions("local"), None, None) == (8, 1)
    assert serving_shape(BackendOptions("latency-model"), None, None) == (1, 64)
    assert serving_shape(BackendOptions("latency-model", sync_batch=100), None, None) == (1, 100)
    with pytest.raises(ValueError, match="--batch-size 1"):
        serving_shape(BackendOptions("latency-model"), 8, None)
    with pytest.raises(ValueError, match="--concurrency to at least 32"):
        serving_shape(BackendOptions("latency-model", sync_batch=32), None, 16)


def test_the_factory_builds_one_backend_with_the_workload():
    options = BackendOptions(
        "latency-model",
        sites_count=2,
        latency_median_s=0.2,
        latency_sigma=0.1,
        workload_seed=7,
        horizons={"easy": 4, "medium": 8, "hard": 12},
        sync_batch=5,
    )
    factory = backend_factory(options)
    backend = factory(None)
    assert isinstance(backend, LatencyModelBackend) and factory(None) is backend
    assert backend.spec == WorkloadSpec(7, 0.2, 0.1, {"easy": 4, "medium": 8, "hard": 12})
    assert backend.sync_batch == 5
    task_id = next(iter(TASKS))
    assert backend.length(task_id, "r-000000") == episode_length(
        backend.spec, "r-000000", TASKS[task_id]["difficulty"]
    )


def test_the_cli_refuses_too_little_concurrency_for_a_sync_batch():
    result = CliRunner().invoke(
        app,
        [
            "worker",
            "policy",
            "--backend",
            "latency-model",
            "--sync-batch",
            "32",
            "--concurrency",
            "8",
        ],
    )
    assert result.exit_code == 1
    assert "--concurrency to at least 32" in result.output


def test_sync_an_extra_episode_of_a_full_batch_is_served_alone(caplog):
    spec = WorkloadSpec(median_s=0.01, horizons=SHORT)
    backend = LatencyModelBackend({}, spec, sync_batch=1, sync_timeout_s=30.0)
    _ask(backend, "t-easy", "full-000000", 1)  # a batch of one: answered alone, at once
    with caplog.at_level(logging.WARNING):
        started = time.monotonic()
        _ask(backend, "t-easy", "full-000001", 1)
    assert time.monotonic() - started < 1.0
    assert "full-000001 is served alone" in caplog.text
