"""`webgym bench rollout` at the size of a test: one round of every phase on the real stack, with
the process profile, the provenance and the progress lines (the full benchmark, with its
repetitions, is the figure of record: bench/results/rollout.json)."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import run_bench

PIPELINE_ROLES = {
    "bench", "kafka broker", "faust worker", "browser worker", "policy worker",
    "playwright driver", "chromium renderer", "chromium browser", "profiler",
}  # fmt: skip


@pytest.mark.timeout(900)
def test_one_small_round_profiles_every_process_and_says_where_it_came_from(
    stack_settings, tmp_path
):
    args = ["--episodes", "4", "--in-flight", "2", "--median", "0.3", "--sync-batches", "1",
            "--partitions", "3", "--sites", "2", "--seeds", "3",
            "--repeat", "1", "--unloaded-seconds", "5",
            "--growth", "--growth-in-flight", "1,2", "--growth-episodes", "3",
            "--growth-replays", "2", "--warmup-episodes", "2"]  # fmt: skip
    result, done = run_bench(
        stack_settings, "rollout", *args, out=tmp_path / "rollout.json", timeout=840
    )

    provenance = result["provenance"]
    assert len(provenance["commit"]) >= 40 and provenance["machine"]["cores"] >= 1
    assert "rollout" in provenance["command"] and "--repeat 1" in provenance["command"]
    assert result["repeats"] == 1 and result["seeds"] == [3] and len(result["rounds"]) == 1
    [round_] = result["rounds"]
    assert round_["seed"] == 3

    for phase in ("async", "sync", "instant"):
        profile = result[phase]["profile"]
        assert PIPELINE_ROLES <= set(profile["by_role"]), (phase, sorted(profile["by_role"]))
        assert profile["steps"] == result[phase]["steps"] > 0
        for role in ("browser worker", "chromium renderer", "kafka broker"):
            figures = profile["by_role"][role]
            assert figures["cpu_s_per_step"] > 0 and figures["rss_mb"] > 0, (phase, role)
        assert 0 < profile["pipeline_cpu_s_per_step"] and 0 < profile["coverage"]
        # What the phase wrote to the log, per topic: the step topics and Faust's changelog.
        log = result[phase]["log"]
        by_topic = log["by_topic_bytes_per_step"]
        for topic in ("observations", "ops.act", "inferences", "streams-episodes-changelog"):
            assert by_topic.get(topic, 0) > 0, (phase, by_topic)
        assert log["replicas"] >= 1 and log["bytes_per_step"] == pytest.approx(
            sum(by_topic.values()), abs=len(by_topic)
        )
        assert by_topic["observations"] > by_topic["ops.act"]  # a screenshot, not an action
    bare = result["bare"]["profile"]
    assert "chromium renderer" in bare["by_role"] and "browser worker" not in bare["by_role"]

    # The warm-up ran first, and its figures are its own.
    warmup = result["warmup"]
    assert warmup["episodes"] == 2 and warmup["steps"] > 0 and warmup["broker_cpu_s_per_step"] > 0

    # The unloaded Kafka rate is measured, not the rate it was asked for.
    unloaded = result["kafka_unloaded"]
    assert 0 < unloaded["steps_per_s"] <= unloaded["target_steps_per_s"] * 1.05
    assert unloaded["all"]["n"] > 0 and result["async"]["kafka_added_ms"]["all"]["p99"] >= 0

    # The headline figures keep their names, with their spread over the rounds.
    assert set(result["ratios"]) >= {"async_of_ideal", "instant_of_bare", "async_over_sync"}
    ratio = result["spread"]["ratios.async_of_ideal"]
    assert ratio["min"] <= ratio["median"] <= ratio["max"]
    assert ratio["rounds"] == [round_["ratios"]["async_of_ideal"]]
    assert result["ratios"]["async_of_ideal"] == round_["ratios"]["async_of_ideal"]

    # It said what it was doing, phase by phase, with the time left.
    assert done.stderr.count("min left)") == 1 + 6 + 4, done.stderr[-2000:]
    assert done.stderr.index("[warm-up] instant policy done") < done.stderr.index("[round 1/1")
    assert "[growth, seed 3] growth: screenshots minio done in" in done.stderr

    # How cost grows: a row per in-flight count, and screenshots inline against stored.
    growth = result["growth"]
    assert [row["in_flight"] for row in growth["in_flight"]] == [1, 2]
    for row in growth["in_flight"]:
        # --growth-episodes, and at least twice the episodes in flight
        assert row["episodes"] == max(3, 2 * row["in_flight"]) and row["aborted"] == 0
        assert row["steps_per_s"] > 0 and row["browser_rss_mb"] > 0 and row["workers_rss_mb"] > 0
        # Proportional: shared pages split among their sharers, so at most the resident figure.
        assert 0 < row["browser_pss_mb"] <= row["browser_rss_mb"]
        assert 0 < row["workers_pss_mb"] <= row["workers_rss_mb"]
        assert row["log_bytes_per_step"] > 0
    assert set(growth["mb_per_episode_in_flight"]) == {
        "browser", "workers", "browser_rss", "workers_rss"
    }  # fmt: skip
    inline, stored = growth["screenshots"]
    assert (inline["storage"], stored["storage"]) == ("inline", "minio")
    assert inline["objects"] == 0 and stored["objects"] > 0 and stored["object_bytes_per_step"] > 0
    # The screenshots left the log: what it holds per step of observations shrank (a key and a
    # digest stay, not a JPEG).
    assert stored["observations_log_bytes_per_step"] < inline["observations_log_bytes_per_step"] / 5
    for row in (inline, stored):
        replay = row["replay"]
        assert replay["episodes"] == 2 and replay["frames"] > 0
        assert replay["frames_without_screenshot"] == 0 and replay["s_per_episode_p50"] > 0
    assert "[round 1/1, seed 3] kafka_unloaded done in" in done.stderr
