"""The figures of :class:`analytics.stats.RunStats` as Prometheus metrics, served over HTTP.

:class:`StatsCollector` exposes whatever figures it was last given (a scrape never waits for
Kafka); :func:`serve_metrics` registers it in a registry of its own (no global state) and starts
``prometheus_client``'s HTTP server on a daemon thread, bound to loopback unless told otherwise.
Counts are counters (``_total``: they only grow while following a log); rates, throughput,
percentiles and lag are gauges. Latencies are in seconds, as Prometheus prefers; every metric is
also in ``webgym stats --json`` (in ms there).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from analytics.errors import AnalyticsError

LATENCY_KINDS = {"operations": "operation", "hops": "hop", "service": "service"}
QUANTILES = {"0.5": "p50", "0.95": "p95", "0.99": "p99"}


class StatsCollector(Collector):
    """Yields the metrics of the latest figures; ``update`` may be called from any thread."""

    def __init__(self) -> None:
        self._figures: dict[str, Any] | None = None
        self._caught_up = False

    def update(self, figures: dict[str, Any], caught_up: bool) -> None:
        self._figures, self._caught_up = figures, caught_up  # replaced whole: scrapes see one

    def collect(self) -> Iterator[Metric]:
        figures, caught_up = self._figures, self._caught_up
        yield GaugeMetricFamily(
            "webgym_stats_caught_up",
            "1 once everything that was in the log when stats attached has been read",
            value=float(caught_up and figures is not None),
        )
        if figures is not None:
            yield from metrics(figures)


def metrics(figures: dict[str, Any]) -> Iterator[Metric]:
    """The metric families of one ``figures()`` dict."""
    episodes, steps, throughput = figures["episodes"], figures["steps"], figures["throughput"]
    by_state = CounterMetricFamily("webgym_episodes", "episodes by state reached", labels=["state"])
    for state, key in (
        ("started", "started"),
        ("ended", "ended"),
        ("finished", "finished"),
        ("aborted", "aborted"),
        ("judged", "judged"),
        ("succeeded", "successes"),
        ("judge_error", "judge_errors"),
        ("blocked", "blocked"),
    ):
        by_state.add_metric([state], episodes[key])
    yield by_state
    yield GaugeMetricFamily(
        "webgym_episodes_in_flight", "episodes started and not ended", value=episodes["in_flight"]
    )
    yield from _gauge(
        "webgym_success_rate", "successes / judged episodes", episodes["success_rate"]
    )
    for name, help_text, key in (
        ("webgym_judged_episodes", "judged episodes by group", "judged"),
        ("webgym_successful_episodes", "successful episodes by group", "successes"),
        ("webgym_group_success_rate", "successes / judged episodes by group", "rate"),
    ):
        family = GaugeMetricFamily(name, help_text, labels=["by", "group"])
        for by, rows in figures["success_by"].items():
            for group, row in rows.items():
                if row[key] is not None:
                    family.add_metric([by, group], row[key])
        yield family
    yield CounterMetricFamily("webgym_steps", "policy steps (inferences)", value=steps["steps"])
    yield CounterMetricFamily(
        "webgym_parse_errors", "unparseable policy replies", value=steps["parse_errors"]
    )
    yield CounterMetricFamily(
        "webgym_repeated_steps",
        "steps of judged trajectories that left the screen unchanged",
        value=steps["repeated_steps"],
    )
    yield from _gauge("webgym_parse_error_rate", "parse errors / steps", steps["parse_error_rate"])
    yield from _gauge(
        "webgym_repetition_rate",
        "repeated / judged trajectory steps",
        steps["repetition_rate"],
    )
    yield from _gauge(
        "webgym_episodes_per_hour", "episodes ended per hour", throughput["episodes_per_hour"]
    )
    yield from _gauge(
        "webgym_steps_per_second", "policy steps per second", throughput["steps_per_s"]
    )
    latency = GaugeMetricFamily(
        "webgym_latency_seconds",
        "nearest-rank latency percentiles by operation type, hop and worker phase",
        labels=["kind", "name", "quantile"],
    )
    samples = GaugeMetricFamily(
        "webgym_latency_samples", "latency samples measured", labels=["kind", "name"]
    )
    for kind, rows in figures["latency_ms"].items():
        for name, row in rows.items():
            samples.add_metric([LATENCY_KINDS[kind], name], row["n"])
            for quantile, column in QUANTILES.items():
                if row[column] is not None:
                    latency.add_metric([LATENCY_KINDS[kind], name, quantile], row[column] / 1000)
    yield latency
    yield samples
    lag = figures["policy_lag"]
    policy_lag = GaugeMetricFamily(
        "webgym_policy_lag_versions",
        "policy versions an inference was behind the newest announced one",
        labels=["stat"],
    )
    for stat in ("mean", "max"):
        if lag[stat] is not None:
            policy_lag.add_metric([stat], lag[stat])
    yield policy_lag
    yield CounterMetricFamily(
        "webgym_inferences_behind",
        "inferences made by a policy version older than the newest announced",
        value=lag["behind"],
    )
    dead_letters = figures["dead_letters"]
    yield CounterMetricFamily(
        "webgym_dead_letters", "records on the dead-letter topic", value=dead_letters["total"]
    )
    by_topic = CounterMetricFamily(
        "webgym_dead_letters_by_source",
        "dead letters by the topic they came from",
        labels=["source_topic"],
    )
    for topic, count in dead_letters["by_source_topic"].items():
        by_topic.add_metric([topic], count)
    yield by_topic
    undecodable = CounterMetricFamily(
        "webgym_undecodable_records", "records that did not decode", labels=["topic"]
    )
    for topic, count in figures["undecodable"].items():
        undecodable.add_metric([topic], count)
    yield undecodable


def _gauge(name: str, help_text: str, value: float | None) -> Iterator[Metric]:
    if value is not None:  # no sample rather than a made-up 0 before there is any data
        yield GaugeMetricFamily(name, help_text, value=value)


def serve_metrics(port: int, host: str = "127.0.0.1") -> tuple[StatsCollector, Any]:
    """Start serving; returns the collector to update and the server (``.shutdown()`` it)."""
    collector = StatsCollector()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    try:
        server, _thread = start_http_server(port, addr=host, registry=registry)
    except OSError as exc:
        raise AnalyticsError(
            f"cannot serve metrics on {host}:{port} ({exc}); pick a free --metrics-port"
        ) from exc
    return collector, server
