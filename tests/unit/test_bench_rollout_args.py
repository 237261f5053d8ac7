"""Benchmark command lines: `webgym bench rollout --repeat 0` (no rounds, only the extra tables,
never over rollout.json) and the browser-priority comparison's configurations."""

from __future__ import annotations

import pytest

from bench import rollout


def test_no_rounds_and_nothing_else_to_run_is_refused_before_anything_starts(capsys):
    with pytest.raises(SystemExit) as refused:
        rollout.main(["--repeat", "0"])
    assert refused.value.code == 2
    assert "--growth and/or --scaling" in capsys.readouterr().err


def test_a_growth_only_run_writes_its_own_file(monkeypatch, tmp_path):
    written = {}

    def growth(base, args, progress):
        written["seed"] = args.seed
        return {"in_flight": []}

    def write_result(path, result, produced_by):
        written["path"], written["rounds"] = path, result["rounds"]
        return result

    monkeypatch.setattr(rollout, "growth", growth)
    monkeypatch.setattr(rollout, "write_result", write_result)
    monkeypatch.setattr(rollout, "one_round", lambda *a: pytest.fail("no round may run"))
    rollout.main(["--repeat", "0", "--growth", "--seeds", "7,0", "--warmup-episodes", "0"])
    assert written == {"seed": 7, "path": rollout.RESULTS.with_name("rollout_growth.json"),
                       "rounds": []}  # fmt: skip


def test_a_scaling_only_run_shows_each_phase_and_writes_its_own_file(monkeypatch, capsys):
    written, ran = {}, []

    def run_phase(base, label, args, median_s, browser_workers=1, partitions=None, **_):
        ran.append((browser_workers, partitions, args.seed))
        return {"_episodes": [], "steps_per_s": 1.0, "episodes_per_hour": 2.0,
                "utilisation": {}, "kafka_added_ms": {"all": {}},
                "profile": {"pipeline_cpu_s_per_step": 0.05},
                "log": {"bytes_per_step": 9}}  # fmt: skip

    def write_result(path, result, produced_by):
        written["path"], written["rows"] = path, result["scaling"]
        return result

    monkeypatch.setattr(rollout, "run_phase", run_phase)
    monkeypatch.setattr(rollout, "write_result", write_result)
    rollout.main(["--repeat", "0", "--scaling", "--seeds", "7", "--warmup-episodes", "0"])
    assert ran == [(w, p, 7) for w, p in rollout.SCALING]
    assert written["path"] == rollout.RESULTS.with_name("rollout_scaling.json")
    assert [(r["browser_workers"], r["partitions"]) for r in written["rows"]] == list(
        rollout.SCALING
    )
    assert written["rows"][0]["log_bytes_per_step"] == 9
    out, err = capsys.readouterr()
    assert '"browser_workers": 4' in out  # the rows it measured, not "null"
    assert f"({len(rollout.SCALING)}/{len(rollout.SCALING)} phases" in err
    assert "scaling: 4 browser workers, 8 partitions done" in err


def test_the_warm_up_runs_first_and_enters_no_round(monkeypatch, capsys):
    ran, written = [], {}

    def run_phase(base, label, args, median_s, episodes=None, **_):
        ran.append((label, median_s, episodes, args.seed))
        profile = {"pipeline_cpu_s_per_step": 0.09, "by_role": {"kafka broker": {
            "cpu_s_per_step": 0.02}}}  # fmt: skip
        return {"episodes": episodes, "steps": 40, "steps_per_s": 5.0, "profile": profile}

    def one_round(base, args, progress):
        ran.append(("round", args.seed))
        return {"seed": args.seed, "ratios": {"async_of_ideal": 0.8}}

    def write_result(path, result, produced_by):
        written.update(result)
        return result

    monkeypatch.setattr(rollout, "run_phase", run_phase)
    monkeypatch.setattr(rollout, "one_round", one_round)
    monkeypatch.setattr(rollout, "spread", lambda rounds: {})
    monkeypatch.setattr(rollout, "write_result", write_result)
    monkeypatch.setattr(rollout, "plot", lambda result: None)
    rollout.main(["--repeat", "1", "--seeds", "7,0", "--warmup-episodes", "5"])
    assert ran == [("warmup", 0.0, 5, 7), ("round", 7), ("round", 0)]
    assert written["warmup"] == {"episodes": 5, "steps": 40, "steps_per_s": 5.0,
                                 "pipeline_cpu_s_per_step": 0.09,
                                 "broker_cpu_s_per_step": 0.02}  # fmt: skip
    assert written["ratios"] == {"async_of_ideal": 0.8}  # the rounds' median, no warm-up in it
    assert "[warm-up] instant policy done in" in capsys.readouterr().err

    with pytest.raises(SystemExit):
        rollout.main(["--warmup-episodes", "-1"])
    assert "0 or more" in capsys.readouterr().err


def test_browser_priority_compares_nicenesses_then_weights_and_names_a_bad_value():
    from bench.browser_priority import configurations

    configs = configurations("0, 10", "50")
    assert list(configs) == ["nice 0", "nice 10", "cpu.weight 50"]
    assert (configs["nice 10"].browser_nice, configs["nice 10"].browser_cpu_weight) == (10, 0)
    assert (configs["cpu.weight 50"].browser_nice, configs["cpu.weight 50"].browser_cpu_weight) == (
        0, 50
    )  # fmt: skip
    with pytest.raises(ValueError, match="--weights: 0 is not"):
        configurations("0", "0")
    with pytest.raises(ValueError, match="--nice: 20 is not"):
        configurations("20", "")


def test_a_comparison_names_its_configurations_and_refuses_what_is_not_a_setting(capsys):
    from bench import compare
    from infra.settings import Settings

    name, changes = compare.parse_config("linger 2:streams_linger_ms=2, browser_nice=3")
    assert (name, changes) == ("linger 2", {"streams_linger_ms": "2", "browser_nice": "3"})
    settings = compare.configured(Settings(topic_prefix="kept"), changes)
    assert (settings.streams_linger_ms, settings.browser_nice, settings.topic_prefix) == (
        2, 3, "kept"
    )  # fmt: skip
    assert compare.parse_config("as is:") == ("as is", {})
    for bad, words in [
        ("streams_linger_ms=2", "has no name"),
        ("x:streams_linger_ms", "is not FIELD=VALUE"),
        ("x:lingr=2", "'lingr' is not a setting"),
    ]:
        with pytest.raises(ValueError, match=words):
            compare.parse_config(bad)
    for argv, words in [
        (["--config", "a:"], "give --config twice or more"),
        (["--config", "a:", "--config", "b:streams_linger_ms=-1"], "streams_linger_ms: Input"),
        (["--config", "a:", "--config", "a:browser_nice=1"], "the same name"),
    ]:
        with pytest.raises(SystemExit):
            compare.main([*argv, "--out", "/dev/null"])
        assert words in capsys.readouterr().err


def test_the_stream_processors_producer_lingers_as_set(tmp_path):
    from infra.settings import Settings
    from streams.app import AGENT_SETS, build_app

    for ms, seconds in [(0, 0), (5, 0.005)]:
        settings = Settings(streams_linger_ms=ms, state_dir=tmp_path)
        assert build_app(settings, AGENT_SETS).conf.producer_linger == seconds


def test_a_comparison_rotates_its_order_so_each_configuration_leads_a_round(tmp_path, monkeypatch):
    from bench import compare
    from bench.rounds import rotated
    from infra.settings import Settings

    assert [rotated("abc", n) for n in range(4)] == [
        ["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"], ["a", "b", "c"]
    ]  # fmt: skip
    assert rotated([], 3) == []
    ran: list[int] = []
    monkeypatch.setattr(compare, "one_round", lambda s, w, p: ran.append(s.browser_nice) or {})
    monkeypatch.setattr(compare, "figures", lambda one: {"steps": float(len(ran))})
    configs = {"a": Settings(browser_nice=1), "b": Settings(browser_nice=2)}
    result = compare.compare("t", configs, compare.rollout_args(), 3, tmp_path / "r.json", "s")
    assert ran == [1, 2, 2, 1, 1, 2]
    assert result["orders"] == [["a", "b"], ["b", "a"], ["a", "b"]]
    assert result["rounds"] == {"a": [{"steps": 1.0}, {"steps": 4.0}, {"steps": 5.0}],
                                "b": [{"steps": 2.0}, {"steps": 3.0}, {"steps": 6.0}]}  # fmt: skip
    assert result["profiles"] == {"a": [{}, {}, {}], "b": [{}, {}, {}]}


def test_a_comparison_keeps_each_rounds_cpu_by_role_to_trace_an_outlier():
    from bench import compare

    row = {"processes": 1, "cpu_s": 38.1, "cpu_s_per_step": 0.0766, "exited_cpu_s": 0.0}
    one = {
        "async": {"profile": {"by_role": {"faust worker": row}}},
        "instant": {"profile": {"by_role": {}}},
        "sync": {"profile": {"by_role": {"faust worker": row}}},  # not a compared phase
    }
    assert compare.profiles(one) == {
        "async": {"faust worker": {"processes": 1, "cpu_s_per_step": 0.0766, "exited_cpu_s": 0.0}},
        "instant": {},
    }
