"""Hanging and crashing pages in the task mix: only their episodes end, the worker lives on.

The run's task set is the practice web's, with some tasks starting on a fault page instead:
Chromium's ``chrome://crash`` (the renderer dies) and ``chrome://hang`` (the renderer stops
answering), open only with ``webgym worker browser --fault-injection``, and the practice web's
``/__webgym/hang``, a page whose server never answers. 16 episodes in flight on one browser
worker: those episodes end aborted with a reason that says what happened, every other episode
ends normally and is judged, the browser worker is the same process from start to end (a child
that dies fails the run), and the checker (`webgym check`) passes.
"""

from __future__ import annotations

from collections import Counter

from infra.log_reader import read_topic
from sites import generate_sites
from sites.tasks import generate_tasks
from tests.chaos.conftest import Fault, assert_nothing_lost, chaos_options, chaos_run

IN_FLIGHT = 16
EPISODES = 32
SITES = 4  # 8 tasks per difficulty: each is tried before any is tried twice
SEED = 3
NORMAL_ENDS = {"answer", "horizon", "parse errors"}
# A hang ends in a timeout: the navigation's own, or the worker's bound on a page that stops
# answering at all.
HANG_REASONS = ("timed out", "stopped answering", "did not finish loading")


def fault_tasks() -> tuple[tuple[dict, ...], dict[str, str]]:
    """The practice-web tasks, with some starting on a fault page; and task id -> fault."""
    tasks = generate_tasks(generate_sites(seed=SEED, count=SITES), seed=SEED)
    by_difficulty: dict[str, list[dict]] = {}
    for task in tasks:
        by_difficulty.setdefault(task["difficulty"], []).append(task)
    faults = {}
    plan = (
        ("easy", 0, "crash", "chrome://crash"),
        ("medium", 0, "crash", "chrome://crash"),
        ("easy", 1, "hang", "chrome://hang"),
        ("hard", 0, "hang", "chrome://hang"),
        ("medium", 1, "server hang", "http://{website}/__webgym/hang"),
    )
    for difficulty, index, fault, url in plan:
        task = by_difficulty[difficulty][index]
        task["start_url"] = url.format(website=task["website"])
        faults[task["task_id"]] = fault
    return tuple(tasks), faults


def test_hanging_and_crashing_pages_abort_only_their_episodes(run_settings, request):
    tasks, faults = fault_tasks()
    fault = Fault("hanging and renderer-crash pages in the task mix")
    pids: set[int] = set()

    def watch(summary, children):
        worker = children["browser worker"]
        pids.add(worker.process.pid)
        assert worker.process.poll() is None, f"the browser worker died; see {worker.log}"
        if not fault.struck_ms and summary.started:
            fault.mark()  # the fault pages are in the mix from the first episode on

    options = chaos_options(
        "bp", episodes=EPISODES, in_flight=IN_FLIGHT, sites=SITES, seed=SEED, tasks=tasks,
        browser_args=("--fault-injection",),
    )  # fmt: skip
    result = chaos_run(run_settings, options, fault, watch, request)
    assert len(pids) == 1, f"the browser worker was replaced: pids {sorted(pids)}"
    assert_nothing_lost(result, EPISODES)

    prefix = f"{result.summary.run_id}-"
    task_of, ends = {}, {}
    for event in read_topic(run_settings, "episodes"):
        record = event.record
        if event.event_type is None or not record["episode_id"].startswith(prefix):
            continue
        if record["kind"] == "started":
            task_of[record["episode_id"]] = record["task_id"]
        else:
            ends.setdefault(record["episode_id"], record)
    assert len(task_of) == len(ends) == EPISODES
    seen = Counter(faults.get(task_of[e], "none") for e in task_of)
    assert seen["crash"] and seen["hang"] and seen["server hang"], seen

    scored = result.summary.episodes
    for episode_id, task_id in task_of.items():
        end = ends[episode_id]
        what = faults.get(task_id)
        where = (episode_id, what, end["kind"], end["reason"])
        if what == "crash":
            assert (end["kind"], end["reason"]) == ("aborted", "browser: renderer crashed"), where
        elif what in ("hang", "server hang"):
            assert end["kind"] == "aborted", where
            assert end["reason"].startswith("browser: "), where
            assert any(words in end["reason"] for words in HANG_REASONS), where
        else:  # unaffected: ended normally and judged
            assert end["kind"] == "finished", where
            assert end["reason"].split(":")[0] in NORMAL_ENDS, where
            assert scored[episode_id]["judge_error"] is None, where
    normal = [e for e, t in task_of.items() if t not in faults]
    assert sum(scored[e]["reward"] == 1.0 for e in normal) > 0
