"""The benchmark's process profile: roles from command lines, CPU and memory per role from
samples, /proc parsing, and the rounds folded into medians with their spread."""

from __future__ import annotations

import os

import pytest

from bench.process_profile import ProfileAccount, PssSchedule, Roles, role_of
from bench.rollout import median_tree, spread
from bench.rollout_growth import memory_per_episode
from infra.processes import CLOCK_TICKS, PAGE_BYTES, ProcStat, descendants, parse_stat, read_stat

ROOT, PROFILER = 100, 101


@pytest.mark.parametrize(
    ("argv", "pid", "role"),
    [
        (["python", "-m", "bench.rollout"], ROOT, "bench"),
        (["python", "-c", "from multiprocessing.spawn import spawn_main"], PROFILER, "profiler"),
        (["python", "-c", "from multiprocessing.spawn import spawn_main"], 7, "bench helper"),
        (["/usr/bin/java", "-Xmx768m", "-cp", "x", "kafka.Kafka", "server.properties"], 7,
         "kafka broker"),
        (["/root/.cache/webgym/minio/v1/minio", "server", "/data"], 7, "minio"),
        (["/usr/lib/chromium/chromium", "--type=renderer", "--lang=en"], 7, "chromium renderer"),
        (["/usr/lib/chromium/chromium", "--type=gpu-process"], 7, "chromium gpu"),
        (["/usr/lib/chromium/chromium", "--type=utility", "--utility-sub-type=x"], 7,
         "chromium utility"),
        (["/usr/lib/chromium/chromium", "--type=zygote"], 7, "chromium zygote"),
        (["/usr/lib/chromium/chromium --type=renderer --lang=en-US"], 7, "chromium renderer"),
        (["/proc/self/exe", "--type=utility", "--utility-sub-type=x"], 7, "chromium utility"),
        (["/proc/self/exe", "--version"], 7, "other exe"),
        (["/usr/lib/chromium/chromium", "--headless", "--remote-debugging-pipe"], 7,
         "chromium browser"),
        (["/venv/lib/playwright/driver/node", "/venv/cli.js", "run-driver"], 7,
         "playwright driver"),
        (["/venv/bin/faust", "-A", "streams.app", "worker", "-l", "info"], 7, "faust worker"),
        (["/venv/bin/python", "-m", "commands.main", "worker", "browser"], 7, "browser worker"),
        (["/venv/bin/python", "-m", "commands.main", "worker", "policy", "--backend", "x"], 7,
         "policy worker"),
        (["/venv/bin/python", "-m", "commands.main", "learner", "--model", "m"], 7, "learner"),
        (["/venv/bin/python", "-m", "commands.main", "check"], 7, "webgym check"),
        (["/bin/sh", "-c", "true"], 7, "other sh"),
        ([], 7, None),
    ],
)  # fmt: skip
def test_every_process_of_a_run_gets_its_role(argv, pid, role):
    assert role_of(argv, pid, ROOT, PROFILER) == role


def _stat(pid: int, cpu_s: float, rss_mb: float, start: int = 1) -> ProcStat:
    return ProcStat(pid, 1, "S", cpu_s, 0.0, start, int(rss_mb * 2**20))


def test_cpu_is_counted_inside_the_window_and_memory_at_its_peak():
    account = ProfileAccount()
    # At the start: the broker has run for 100 s already; one renderer.
    account.add(0.0, 1000.0, [("kafka broker", _stat(1, 100.0, 900)),
                              ("chromium renderer", _stat(2, 5.0, 100))])  # fmt: skip
    # A second renderer is born; the first uses 3 s.
    account.add(1.0, 1004.0, [("kafka broker", _stat(1, 100.5, 900)),
                              ("chromium renderer", _stat(2, 8.0, 100)),
                              ("chromium renderer", _stat(3, 1.0, 150))])  # fmt: skip
    # The first renderer exits; its pid is reused by another renderer (another start time).
    account.add(2.0, 1010.0, [("kafka broker", _stat(1, 101.0, 950)),
                              ("chromium renderer", _stat(3, 2.0, 150)),
                              ("chromium renderer", _stat(2, 0.5, 80, start=9))])  # fmt: skip
    figures = account.figures(steps=10)
    broker, renderers = figures["by_role"]["kafka broker"], figures["by_role"]["chromium renderer"]
    assert broker["cpu_s"] == 1.0 and broker["processes"] == 1
    assert renderers["cpu_s"] == 3.0 + 2.0 + 0.5 and renderers["processes"] == 3
    assert renderers["cpu_s_per_step"] == 0.55
    assert renderers["rss_mb"] == 250.0 and broker["rss_mb"] == 950.0  # peaks of the sums
    assert figures["machine_busy_s"] == 10.0 and figures["profiled_cpu_s"] == 6.5
    assert figures["coverage"] == 0.65
    assert figures["pipeline_cpu_s_per_step"] == 0.1  # the broker; not Chromium
    assert figures["chromium_cpu_s_per_step"] == 0.55
    assert list(figures["by_role"]) == ["chromium renderer", "kafka broker"]  # by CPU


def test_a_process_that_execs_counts_as_what_it_became():
    # Debian's `chromium` is a shell script that execs the browser: first seen as `sh`.
    account = ProfileAccount()
    account.add(0.0, 100.0, [("kafka broker", _stat(1, 10.0, 900))])
    account.add(1.0, 101.0, [("kafka broker", _stat(1, 10.1, 900)),
                             ("other sh", _stat(5, 0.01, 2))])  # fmt: skip
    account.add(2.0, 103.0, [("kafka broker", _stat(1, 10.2, 900)),
                             ("chromium browser", _stat(5, 1.5, 300))])  # fmt: skip
    by_role = account.figures(steps=3)["by_role"]
    assert "other sh" not in by_role
    browser = by_role["chromium browser"]
    assert browser["cpu_s"] == 1.5 and browser["processes"] == 1


def test_a_shell_is_asked_again_what_it_is_and_other_processes_once():
    # The sampler names such a process twice: `sh` first, then what it exec'd (same pid and
    # start time); any other process is read once.
    argvs = {5: [["/bin/sh", "/usr/bin/chromium"], ["/usr/lib/chromium/chromium", "--headless"]],
             6: [["/usr/lib/chromium/chromium", "--type=renderer"], ["never read"]]}  # fmt: skip
    reads = []

    def read(pid):
        if pid == 1:  # the parent of both: the bench
            return ["python", "-m", "bench.rollout"]
        reads.append(pid)
        return argvs[pid].pop(0)

    roles = Roles(root=1, profiler=2, read_argv=read)
    run = {5, 6}
    assert [roles.of(_stat(5, 0.01, 2), run), roles.of(_stat(6, 0.1, 2), run)] == [
        "other sh",
        "chromium renderer",
    ]
    assert [roles.of(_stat(5, 0.5, 2), run), roles.of(_stat(6, 0.2, 2), run)] == [
        "chromium browser",
        "chromium renderer",
    ]
    assert reads == [5, 6, 5]
    argvs[9] = [["/usr/bin/python3", "elsewhere.py"]]  # not below the bench: not the run's
    assert roles.of(_stat(9, 0.1, 2), run) is None


def test_a_fork_not_yet_exec_d_is_asked_again_until_it_is_what_it_became():
    # Playwright's driver (pid 10) spawns Chromium (pid 11): between the fork and the exec, the
    # child's command line is the driver's. Sampled then, it must not stay the driver.
    driver = ["/venv/driver/node", "/venv/cli.js", "run-driver"]
    bench = ["python", "-m", "bench.rollout"]  # pid 1, the driver's parent
    argvs = {11: [driver, ["/usr/lib/chromium/chromium", "--headless"]]}
    reads = []

    def read(pid):
        reads.append(pid)
        return {1: bench, 10: driver}.get(pid) or argvs[pid].pop(0)

    roles = Roles(root=1, profiler=2, read_argv=read)
    run = {1, 10, 11}
    child = ProcStat(11, 10, "S", 0.0, 0.0, 5, 0)
    assert roles.of(_stat(10, 0.1, 1), run) == "playwright driver"
    assert roles.of(child, run) == "playwright driver"  # the fork, as the driver still
    assert roles.of(child, run) == "chromium browser"  # exec'd since: read again
    reads.clear()
    assert [roles.of(child, run), roles.of(_stat(10, 0.2, 1), run)] == [
        "chromium browser",
        "playwright driver",
    ]
    assert reads == []  # settled: neither is read again


def test_the_profiler_and_the_bench_helpers_are_not_the_pipeline_s_cost():
    account = ProfileAccount()
    processes = [("profiler", 1), ("bench helper", 2), ("bench", 3), ("browser worker", 4)]
    account.add(0.0, 0.0, [(role, _stat(pid, 0.0, 10)) for role, pid in processes])
    account.add(1.0, 8.0, [(role, _stat(pid, 2.0, 10)) for role, pid in processes])
    assert account.figures(steps=4)["pipeline_cpu_s_per_step"] == 1.0  # bench + browser worker


def test_proc_stat_is_parsed_whatever_the_command_name_holds():
    times = ["300", "100", "50", "50"]  # utime, stime, cutime, cstime
    fields = ["S", "42"] + ["0"] * 9 + times + ["39", "19", "1", "0"] + ["777", "0", "25"]
    stat = parse_stat(9, f"9 (we) ird (name)) {' '.join(fields)}")
    assert stat.ppid == 42 and stat.state == "S" and stat.start_ticks == 777
    assert stat.cpu_s == 400 / CLOCK_TICKS and stat.children_cpu_s == 100 / CLOCK_TICKS
    assert stat.rss_bytes == 25 * PAGE_BYTES and stat.nice == 19


def test_this_process_is_read_from_proc_and_found_below_its_parent():
    me = read_stat(os.getpid())
    assert me is not None and me.ppid == os.getppid() and me.rss_bytes > 0
    assert os.getpid() in descendants(os.getppid())


def test_rounds_fold_into_medians_and_the_headline_figures_keep_their_spread():
    rounds = [
        {"ratios": {"async_of_ideal": r}, "async": {"steps_per_s": s, "label": f"async{i}"}}
        for i, (r, s) in enumerate([(0.7, 5.0), (0.9, 6.0), (0.8, 9.0)])
    ]
    folded = median_tree(rounds)
    assert folded == {"ratios": {"async_of_ideal": 0.8}, "async": {"steps_per_s": 6.0,
                                                                   "label": "async0"}}  # fmt: skip
    found = spread(rounds)
    assert found["ratios.async_of_ideal"] == {"median": 0.8, "min": 0.7, "max": 0.9,
                                              "rounds": [0.7, 0.9, 0.8]}  # fmt: skip
    assert "ratios.instant_of_bare" not in found  # no round has it


def test_proportional_memory_is_the_peak_of_the_samples_that_read_it():
    account = ProfileAccount()
    renderers = [
        ("chromium renderer", _stat(2, 1.0, 100)),
        ("chromium renderer", _stat(3, 1.0, 100)),
    ]
    account.add(0.0, 10.0, renderers, {2: 40.0, 3: 30.0})
    account.add(1.0, 11.0, renderers)  # not read this time
    account.add(2.0, 12.0, renderers + [("kafka broker", _stat(1, 5.0, 900))], {2: 50.0, 3: 35.0})
    figures = account.figures(steps=2)
    assert figures["pss_samples"] == 2
    assert figures["by_role"]["chromium renderer"]["pss_mb"] == 85.0  # 50 + 35, the peak sum
    assert figures["by_role"]["chromium renderer"]["rss_mb"] == 200.0  # shared pages twice
    assert figures["by_role"]["kafka broker"]["pss_mb"] == 0.0  # no pid read: nothing known
    # The sampler reads proportional sizes (also) when a role's resident size peaks.
    assert account.new_peak([("chromium renderer", _stat(2, 1.0, 201))])
    assert not account.new_peak([("chromium renderer", _stat(2, 1.0, 200))])
    assert account.new_peak([("policy worker", _stat(9, 1.0, 1))])  # a role not seen yet


def test_growth_charges_each_episode_the_slope_of_both_memories():
    rows = [
        {"in_flight": n, "browser_pss_mb": 500 + 40 * n, "browser_rss_mb": 900 + 300 * n,
         "workers_pss_mb": 800 + n, "workers_rss_mb": 900 + n}
        for n in (8, 16, 32)
    ]  # fmt: skip
    assert memory_per_episode(rows) == {
        "browser": 40.0, "browser_rss": 300.0, "workers": 1.0, "workers_rss": 1.0
    }  # fmt: skip
    assert memory_per_episode(rows[:1])["browser"] is None  # one point: no slope


def test_proportional_sizes_are_read_at_new_peaks_within_a_cpu_budget():
    schedule = PssSchedule(share=0.25, every=10)
    reads = []
    for sample in range(20):  # every second a new resident peak, as while pages load
        read = schedule.due(float(sample), new_peak=lambda: True, last=sample == 19)
        schedule.took(float(sample), read, 1.0 if read else 0.0)  # 1 s of CPU a read
        reads.append(sample) if read else None
    # The first; then each time a quarter of the time since the start covers 1 s more; the last.
    assert reads == [0, 4, 8, 12, 16, 19]


def test_without_new_peaks_they_are_read_every_few_samples_when_cheap():
    schedule = PssSchedule(share=0.02, every=4)
    reads = []
    for sample in range(9):
        read = schedule.due(sample * 0.5, new_peak=lambda s=sample: s == 2, last=False)
        schedule.took(sample * 0.5, read, 0.001 if read else 0.0)
        reads.append(sample) if read else None
    assert reads == [0, 2, 6]  # the first; a new peak; then 4 samples after the last read


def test_the_schedule_is_a_query_and_asks_for_peaks_only_within_the_budget():
    schedule = PssSchedule(share=0.1, every=100)
    asked = []

    def peak() -> bool:
        asked.append(True)
        return False

    assert schedule.due(5.0, peak, last=False)  # the first sample reads
    assert schedule.due(5.0, peak, last=False)  # and asking again changes nothing
    assert schedule.started is None and not asked
    schedule.took(5.0, True, 2.0)  # 2 s of CPU: over 10% of a core until t = 25
    assert not schedule.due(6.0, peak, last=False) and not asked
    assert schedule.due(6.0, peak, last=True)  # the last sample reads regardless
    assert not schedule.due(30.0, peak, last=False) and asked == [True]


def test_a_process_of_the_run_read_empty_is_asked_again():
    # Read in the middle of an exec, a command line is empty. A process of the run so read
    # (Chromium's browser process, exec'd by its wrapper script) must not be left out of the
    # whole window; one outside the run stays outside.
    argvs = {5: [[], ["/usr/lib/chromium/chromium", "--headless"]], 9: [[]]}
    reads = []

    def read(pid):
        reads.append(pid)
        return ["python", "-m", "bench.rollout"] if pid == 1 else argvs[pid].pop(0)

    roles = Roles(root=1, profiler=2, read_argv=read)
    run = {1, 5}
    assert roles.of(_stat(5, 0.01, 1), run) is None
    assert roles.of(_stat(5, 0.5, 1), run) == "chromium browser"
    assert roles.of(_stat(9, 0.1, 1), run) is None
    reads.clear()
    assert [roles.of(_stat(5, 0.6, 1), run), roles.of(_stat(9, 0.2, 1), run)] == [
        "chromium browser",
        None,
    ]
    assert reads == []  # both settled


def _child(pid: int, ppid: int, cpu_s: float, children_s: float = 0.0, start: int = 1) -> ProcStat:
    return ProcStat(pid, ppid, "S", cpu_s, children_s, start, 2**20)


def test_what_exited_processes_used_after_their_last_sample_is_counted_from_their_parent():
    account = ProfileAccount()
    # A zygote that had reaped 50 s of children before the window, and one renderer.
    account.add(0.0, 0.0, [("chromium zygote", _child(10, 1, 1.0, 50.0)),
                           ("chromium renderer", _child(11, 10, 2.0))])  # fmt: skip
    account.add(1.0, 5.0, [("chromium zygote", _child(10, 1, 1.0, 50.0)),
                           ("chromium renderer", _child(11, 10, 3.0))])  # fmt: skip
    # The renderer exits at 4.5 s in all, and the zygote reaps it; another renderer is born
    # and reaped between two samples (0.25 s) — then one is born that lives on.
    account.add(2.0, 9.0, [("chromium zygote", _child(10, 1, 1.0, 54.75)),
                           ("chromium renderer", _child(12, 10, 0.5))])  # fmt: skip
    figures = account.figures(steps=1)
    renderers = figures["by_role"]["chromium renderer"]
    # Sampled: 1.0 (pid 11) + 0.5 (pid 12); after its last sample pid 11 used 1.5, and the
    # renderer no sample saw 0.25: the renderers' role, the children that exited being theirs.
    assert renderers["cpu_s"] == 3.25 and renderers["exited_cpu_s"] == 1.75
    assert figures["exited_cpu_s"] == 1.75 and figures["profiled_cpu_s"] == 3.2
    assert figures["by_role"]["chromium zygote"]["cpu_s"] == 0.0  # its own time did not move


def test_a_child_gone_with_its_parent_is_counted_once_at_the_nearest_live_ancestor():
    account = ProfileAccount()
    account.add(0.0, 0.0, [("playwright driver", _child(20, 1, 5.0)),
                           ("chromium browser", _child(21, 20, 10.0)),
                           ("chromium gpu", _child(22, 21, 4.0))])  # fmt: skip
    # Both exit; the browser reaped the GPU process (6.0 in all) and the driver reaped the
    # browser (11.0 of its own): the driver's children's time grows by 17.0.
    account.add(1.0, 3.0, [("playwright driver", _child(20, 1, 5.5, 17.0))])
    by_role = account.figures(steps=1)["by_role"]
    assert by_role["playwright driver"]["cpu_s"] == 0.5
    assert by_role["chromium browser"]["exited_cpu_s"] == 3.0  # 1.0 of its own + 2.0 of the GPU's
    assert by_role["chromium gpu"]["exited_cpu_s"] == 0.0
    total = sum(role["cpu_s"] for role in by_role.values())
    assert total == 0.5 + 3.0  # nothing sampled twice


def test_a_parent_that_reaped_nothing_new_adds_nothing():
    account = ProfileAccount()
    account.add(0.0, 0.0, [("bench", _child(30, 1, 1.0, 7.0)), ("other git", _child(31, 30, 0.2))])
    account.add(1.0, 1.0, [("bench", _child(30, 1, 1.2, 7.0))])  # not yet waited for: nothing
    assert account.figures(steps=1)["exited_cpu_s"] == 0.0


def test_children_a_process_waits_for_after_its_last_sample_are_not_counted_twice():
    # a546a46's comparison: as a browser worker stops, it waits for Playwright's driver after
    # its own last sample, and the bench found the driver's CPU and the Chromium browser's (29 s)
    # in its children's time, beyond what it had been told: counted again, as a Faust worker's.
    account = ProfileAccount()
    account.add(0.0, 0.0, [("bench", _child(30, 1, 1.0, 40.0)),
                           ("faust worker", _child(34, 30, 1.0)),
                           ("browser worker", _child(31, 30, 2.0)),
                           ("playwright driver", _child(32, 31, 3.0)),
                           ("chromium browser", _child(33, 32, 25.0))])  # fmt: skip
    # Chromium exits (25.5 in all) and the driver waits for it.
    account.add(1.0, 2.0, [("bench", _child(30, 1, 1.0, 40.0)),
                           ("faust worker", _child(34, 30, 1.5)),
                           ("browser worker", _child(31, 30, 2.1)),
                           ("playwright driver", _child(32, 31, 3.2, 25.5))])  # fmt: skip
    # The driver exits (3.3 of its own), the worker has not yet waited for it; the Faust
    # worker stopped at 1.5 and the bench waited for it.
    account.add(2.0, 4.0, [("bench", _child(30, 1, 1.0, 41.5)),
                           ("browser worker", _child(31, 30, 2.2))])  # fmt: skip
    # The worker waits for it (28.8), exits (2.25 of its own); the bench waits for the worker.
    account.add(3.0, 6.0, [("bench", _child(30, 1, 1.0, 41.5 + 2.25 + 28.8))])
    figures = account.figures(steps=1)
    by_role = figures["by_role"]
    assert by_role["faust worker"]["cpu_s"] == 0.5  # its own in the window, nothing more
    assert by_role["chromium browser"]["exited_cpu_s"] == 0.5  # after its last sample
    # After their last samples: the worker 0.05, the driver 0.1, counted at the bench's level.
    assert by_role["browser worker"]["exited_cpu_s"] == 0.15
    assert figures["exited_cpu_s"] == 0.65
    # Each process's CPU in the window, once: Faust 0.5, Chromium 0.5, driver 0.3, worker 0.25.
    total = sum(role["cpu_s"] for role in by_role.values())
    assert total == pytest.approx(0.5 + 0.5 + 0.3 + 0.25)


def test_a_child_told_but_never_waited_for_only_lowers_the_unseen_count():
    # A zygote outlives its Chromium browser and goes to the init process: the walk up told
    # the driver its 20 s, which the driver never reaps, and passes them on when it exits.
    account = ProfileAccount()
    account.add(0.0, 0.0, [("bench", _child(30, 1, 1.0, 40.0)),
                           ("playwright driver", _child(32, 30, 3.0)),
                           ("chromium browser", _child(33, 32, 5.0)),
                           ("chromium zygote", _child(34, 33, 20.0))])  # fmt: skip
    account.add(1.0, 2.0, [("bench", _child(30, 1, 1.0, 40.0)),
                           ("playwright driver", _child(32, 30, 3.1))])  # fmt: skip
    # The driver reaped the browser (5.2 in all), exits (3.2); the bench waits for it.
    account.add(2.0, 4.0, [("bench", _child(30, 1, 1.0, 40.0 + 3.2 + 5.2))])
    figures = account.figures(steps=1)
    # The tails after the last samples (the browser's 0.2, the driver's 0.1) are lost under
    # the zygote's 20 s; nothing is counted twice, nor below zero.
    assert figures["exited_cpu_s"] == 0.0
    assert sum(role["cpu_s"] for role in figures["by_role"].values()) == pytest.approx(0.1)
