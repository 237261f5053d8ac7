"""A local three-node KRaft cluster, started from nothing with `webgym up --brokers 3` in a state
dir of its own (beside the session's one-node stack, on other ports), shared by this module.

Faults on a real cluster: a broker leading a partition SIGKILLed while acknowledged writes are
produced: every acknowledged record is found afterwards, `webgym status` shows the lost node as
under-replicated partitions, and `webgym up` brings the node back until none is
under-replicated.

Then the scale-out battery: the whole loop runs on the cluster (24 episodes, 8 in flight, the
scripted policy) while workers are added, removed and killed and brokers are lost; each run is a
row of the fault table (lost, conflicting duplicates, aborted and why, migrations and their
pause, recovery) and ends with `webgym check` on its log.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from commands.children import Child, settings_env
from infra import stack
from infra.kafka_config import client_config
from infra.log_reader import read_topic
from infra.settings import Settings
from infra.stack.kafka import LocalKafka
from infra.stack.process import port_is_free
from infra.topic_admin import describe_topics, view_cluster
from tests.chaos.conftest import (
    Fault,
    assert_none_aborted,
    assert_nothing_lost,
    chaos_options,
    chaos_run,
)
from tests.e2e.conftest import isolated_settings

NODES = 3


def _free_base() -> int:
    """A broker port whose cluster ports (three brokers, three controllers) are all free."""
    for base in range(19092, 40000, 1000):
        ports = [base + 10 * n + k for n in range(NODES) for k in (0, 1)]
        if all(port_is_free("127.0.0.1", port) for port in ports):
            return base
    raise RuntimeError("no free ports for a local cluster")


def _cli(settings: Settings, *args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "commands.main", *args],
        env=settings_env(settings) | {"COLUMNS": "250"},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[Settings]:
    base = _free_base()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        minio_port = probe.getsockname()[1]
    settings = Settings(
        state_dir=tmp_path_factory.mktemp("cluster-state"),
        bootstrap_servers=f"127.0.0.1:{base}",
        local_kafka_controller_port=base + 1,
        minio_endpoint=f"127.0.0.1:{minio_port}",
        local_kafka_heap="384m",
    )
    started = _cli(settings, "up", "--brokers", str(NODES))
    assert started.returncode == 0, started.stdout + started.stderr
    listed = ",".join(f"127.0.0.1:{base + 10 * n}" for n in range(NODES))
    assert f"WEBGYM_BOOTSTRAP_SERVERS={listed}" in started.stdout, started.stdout
    try:
        # Clients get every node, so that they start whichever node is down.
        yield settings.model_copy(update={"bootstrap_servers": listed})
    finally:
        stopped = _cli(settings, "down")
        assert stopped.returncode == 0, stopped.stderr


def _node(settings: Settings, node: int) -> LocalKafka:
    return LocalKafka(settings, node, NODES)


def _sigkill(settings: Settings, node: int) -> None:
    running = _node(settings, node).process.running()
    assert running is not None, f"node {node} is not running"
    os.killpg(running.pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while _node(settings, node).process.running() is not None:
        assert time.monotonic() < deadline, f"node {node} survived SIGKILL"
        time.sleep(0.2)


def _wait_all_in_sync(settings: Settings, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        view = view_cluster(settings)
        if len(view.brokers) == NODES and not view.under_replicated and not view.offline:
            return
        assert time.monotonic() < deadline, f"still under-replicated: {view.under_replicated[:5]}"
        time.sleep(1)


def test_the_cluster_replicates_the_table_and_refuses_what_it_cannot_hold(cluster: Settings):
    status = _cli(cluster, "status")
    assert status.returncode == 0, status.stderr
    for node in range(1, NODES + 1):
        assert f"kafka-{node} " in status.stdout and f"node {node}," in status.stdout
    assert status.stdout.count("active controller") == 1, status.stdout
    assert "3 broker(s)" in status.stdout and "0 of" in status.stdout

    metadata = AdminClient(client_config(cluster.bootstrap_servers)).list_topics(timeout=10)
    episodes = metadata.topics[cluster.topic("episodes")]
    assert {len(p.replicas) for p in episodes.partitions.values()} == {3}
    described = describe_topics(cluster, [cluster.topic("episodes")])
    assert described[cluster.topic("episodes")]["min.insync.replicas"] == "2"

    refused = _cli(
        cluster.model_copy(update={"replication_factor": 4, "topic_prefix": "rf4"}),
        "topics",
        "create",
    )
    assert refused.returncode == 1
    assert "replication factor 4 needs 4 brokers" in refused.stderr, refused.stderr
    assert (
        "rf4.episodes"
        not in AdminClient(client_config(cluster.bootstrap_servers)).list_topics(timeout=10).topics
    )

    again = _cli(cluster, "up", "--brokers", "1")  # another shape while this one runs
    assert again.returncode == 1 and "`webgym down`" in again.stderr, again.stderr


def _produce(settings: Settings, topic: str, values: list[str], acked: list[str]) -> None:
    producer = Producer(client_config(settings.bootstrap_servers, {"acks": "all"}))

    def delivered(error, message) -> None:
        if error is None:
            acked.append(message.value().decode())

    for value in values:
        producer.produce(topic, value.encode(), partition=0, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(60) == 0


def _read_all(settings: Settings, topic: str) -> set[str]:
    consumer = Consumer(
        client_config(
            settings.bootstrap_servers,
            {"group.id": f"read-{uuid.uuid4().hex}", "enable.auto.commit": False},
        )
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
    seen: set[str] = set()
    position = 0
    while position < high:
        message = consumer.poll(5)
        if message is None or message.error():
            continue
        seen.add(message.value().decode())
        position = message.offset() + 1
    consumer.close()
    return seen


def test_acknowledged_writes_survive_the_loss_of_the_partition_leader(cluster: Settings):
    admin = AdminClient(client_config(cluster.bootstrap_servers))
    topic = f"acks-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 1, 3, config={"min.insync.replicas": "2"})])[topic].result(
        30
    )
    acked: list[str] = []
    _produce(cluster, topic, [f"before-{n}" for n in range(500)], acked)
    leader = admin.list_topics(topic, timeout=10).topics[topic].partitions[0].leader

    _sigkill(cluster, leader)
    _produce(cluster, topic, [f"after-{n}" for n in range(500)], acked)  # two replicas left

    assert len(acked) == 1000
    assert set(acked) <= _read_all(cluster, topic)
    status = _cli(cluster, "status")
    assert "under-replicated:" in status.stdout, status.stdout
    assert f"kafka-{leader} " in status.stdout and "stopped" in status.stdout

    restarted = _cli(cluster, "up")  # the same shape: only the lost node starts
    assert restarted.returncode == 0, restarted.stderr
    assert f"kafka-{leader} started" in restarted.stdout, restarted.stdout
    _wait_all_in_sync(cluster)
    assert set(acked) <= _read_all(cluster, topic)


# -- the scale-out battery: the loop on the cluster ---------------------------------------------

# CI's length; `make scale-out` (the committed fault table) runs 24.
EPISODES = int(os.environ.get("WEBGYM_SCALE_OUT_EPISODES", "16"))
EARLY, MIDWAY = EPISODES // 4, EPISODES // 2 + 1  # when the faults strike: episodes ended


def _battery(cluster: Settings, tag: str, fault: Fault, strike, request, after=None, **extra):
    """One row of the table: the loop on the cluster, ``strike(run, summary, children)`` called
    on every progress tick with the run's settings, ``after(run)`` once it ended, while its
    topics are still there."""
    with isolated_settings(cluster) as settings:
        options = chaos_options(tag, episodes=EPISODES, in_flight=8, seed=5, **extra)
        result = chaos_run(settings, options, fault, lambda *tick: strike(settings, *tick), request)
        if after is not None:
            after(settings)
        return result


def _add(children: dict[str, Child], name: str, like: str) -> Child:
    """Start one more worker, the same command as the child ``like``, as a user would."""
    model = children[like]
    child = Child.start(name.replace(" ", "-"), model.argv, model.env, model.log.parent)
    children[name] = child  # the run checks it and stops it at the end
    return child


def _remove(children: dict[str, Child], name: str, kill: bool = False) -> None:
    child = children.pop(name)  # not a crash of the run: it is meant to go
    child.kill() if kill else child.stop()


def test_browser_workers_added_mid_run_abort_nothing(cluster: Settings, request):
    fault = Fault("add a 2nd and a 3rd browser worker mid-run")

    def strike(run, summary, children):
        due = (EARLY, MIDWAY)
        if len(fault.struck_ms) < 2 and summary.ended >= due[len(fault.struck_ms)]:
            name = f"browser worker {len(fault.struck_ms) + 2}"
            # Joined mid-run: the run goes on once the newcomer holds its partitions.
            _add(children, name, "browser worker").wait_for("assigned", 120)
            fault.mark()

    result = _battery(cluster, "add", fault, strike, request)
    assert len(fault.struck_ms) == 2
    # How many episodes move depends on which partitions held episodes at the join (0 in one
    # CI run); none may abort either way.
    assert_none_aborted(result, EPISODES)


def _partitions_of(child: Child) -> set[int]:
    """The partitions a browser worker holds now, from its log: ``assigned [..]`` adds,
    ``revoked [..]`` and ``lost [..]`` take away (the group's rebalances are incremental)."""
    held: set[int] = set()
    for change, listed in re.findall(r"(assigned|revoked|lost) \[([\d, ]*)\]", child.text()):
        numbers = {int(n) for n in listed.split(",") if n.strip()}
        held = held | numbers if change == "assigned" else held - numbers
    return held


def _unanswered_acts(run: Settings, partitions: set[int]) -> dict[str, int]:
    """Episodes of the run, on ``partitions``, whose last act op has no observation yet, with
    that op's step."""
    answered = {(e.record["episode_id"], e.record["step"]) for e in read_topic(run, "observations")}
    ended = {
        e.record["episode_id"]
        for e in read_topic(run, "episodes")
        if e.record["kind"] in ("finished", "aborted")
    }
    last: dict[str, int] = {}
    for e in read_topic(run, "ops.act"):
        if e.partition in partitions and e.record["episode_id"] not in ended:
            episode_id = e.record["episode_id"]
            last[episode_id] = max(last.get(episode_id, -1), e.record["step"])
    return {
        episode_id: step
        for episode_id, step in sorted(last.items())
        if (episode_id, step) not in answered
    }


def _acted_after(run: Settings, moved: dict[str, int]) -> list[str]:
    """Episodes of ``moved`` with an act op beyond the step that was unanswered when their
    worker went: only the other worker can serve it, on a page it rebuilt from the log."""
    return sorted(
        {
            e.record["episode_id"]
            for e in read_topic(run, "ops.act")
            if e.record["step"] > moved.get(e.record["episode_id"], 1 << 30)
        }
    )


@pytest.mark.parametrize("kill", [False, True], ids=["sigterm", "sigkill"])
def test_a_browser_worker_that_goes_leaves_its_episodes_to_the_other(
    cluster: Settings, request, kill: bool
):
    fault = Fault(f"{'SIGKILL' if kill else 'SIGTERM'} one browser worker of two")
    moved: dict[str, int] = {}
    looked = [0.0]

    def strike(run, summary, children):
        """Once a third of the run ended, the worker goes while it is running an act op: frozen
        (SIGSTOP) while the log is read, so nothing it answers meanwhile hides the op, and read
        only once what it sent before freezing is in the log (an op answered then, the last of
        its episode, would leave nothing to migrate). Its next owner has to rebuild the page
        from the log to serve the op: a migration, whatever the timing.
        (An episode that had only navigated, the usual case at a random moment, just navigates
        again on the other worker: nothing to migrate.)"""
        if fault.struck_ms or summary.ended < EPISODES // 3 or time.monotonic() < looked[0] + 2:
            return
        looked[0] = time.monotonic()
        leaving = children["browser worker 2"]
        leaving.process.send_signal(signal.SIGSTOP)
        time.sleep(1.5)  # what it sent before it froze lands (replicated) before the log is read
        try:
            moved.update(_unanswered_acts(run, _partitions_of(leaving)))
        finally:
            if not moved:
                leaving.process.send_signal(signal.SIGCONT)
        if moved:
            fault.mark()
            children.pop("browser worker 2")  # not a crash of the run: it is meant to go
            leaving.process.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
            leaving.process.send_signal(signal.SIGCONT)
            leaving.process.wait(timeout=60)

    tag = "bkill" if kill else "term"
    went_on: list[str] = []
    result = _battery(
        cluster, tag, fault, strike, request,
        after=lambda run: went_on.extend(_acted_after(run, moved)), browser_workers=2,
    )  # fmt: skip
    assert fault.struck_ms and moved
    assert_nothing_lost(result, EPISODES)
    # A kill leaves the ops to the other worker: it rebuilds their pages. A worker stopped
    # cleanly may answer the op it is running before it goes (it was running in Chromium while
    # the worker was frozen); the other worker then rebuilds the page at the episode's next op,
    # so only an episode that went on needs a migration.
    if kill or went_on:
        assert result.row["migrations"] > 0, (moved, went_on, result.row)
    if not kill:  # handed over cleanly: nothing may abort
        assert result.row["aborted"] == 0, result.row["aborted_reasons"]
    for reason in result.row["aborted_reasons"]:  # a kill: only pages the log cannot rebuild
        assert "migration diverged at step" in reason, result.row["aborted_reasons"]


def test_policy_workers_added_and_removed_abort_nothing(cluster: Settings, request):
    fault = Fault("add a 2nd policy worker, then stop the 1st")

    def strike(run, summary, children):
        if summary.ended >= EARLY and not fault.struck_ms:
            _add(children, "policy worker 2", "policy worker").wait_for("assigned", 120)
            fault.mark()
        elif summary.ended >= MIDWAY and len(fault.struck_ms) == 1:
            _remove(children, "policy worker")
            fault.mark()

    result = _battery(cluster, "padd", fault, strike, request)
    assert len(fault.struck_ms) == 2
    assert_none_aborted(result, EPISODES)


def _broker_fault(
    cluster: Settings, name: str, tag: str, pick, request, after_kill=lambda node: None
) -> None:
    """SIGKILL the node ``pick()`` names once ``EARLY`` episodes ended (the fault: recovery
    counts from here) and call ``after_kill(node)``; start it again with `webgym up` once
    ``MIDWAY`` ended."""
    fault = Fault(name)
    restarted: list[bool] = []

    def strike(run, summary, children):
        if summary.ended >= EARLY and not fault.struck_ms:
            node = pick()
            _sigkill(cluster, node)
            fault.mark()
            after_kill(node)
        elif summary.ended >= MIDWAY and fault.struck_ms and not restarted:
            up = _cli(cluster, "up")
            assert up.returncode == 0, up.stderr
            restarted.append(True)

    result = _battery(cluster, tag, fault, strike, request)
    assert fault.struck_ms and restarted
    assert_none_aborted(result, EPISODES)
    _wait_all_in_sync(cluster)


def test_a_broker_killed_and_restarted_mid_run_aborts_nothing(cluster: Settings, request):
    def a_leader() -> int:  # a broker that leads partitions of the run's topics
        metadata = AdminClient(client_config(cluster.bootstrap_servers)).list_topics(timeout=10)
        return next(
            p.leader
            for name, topic in sorted(metadata.topics.items())
            if name.endswith(".ops.act")
            for p in topic.partitions.values()
        )

    _broker_fault(cluster, "SIGKILL one broker of three, restarted later", "brk", a_leader, request)


def test_the_active_controller_killed_mid_run_aborts_nothing(cluster: Settings, request):
    nodes = [_node(cluster, n) for n in range(1, NODES + 1)]

    def another_leads(killed: int) -> None:
        deadline = time.monotonic() + 60
        while stack.active_controller(nodes) in (killed, None):
            assert time.monotonic() < deadline, "no other node took over the quorum"
            time.sleep(0.5)

    _broker_fault(
        cluster,
        "SIGKILL the active controller, restarted later",
        "ctl",
        lambda: stack.active_controller(nodes),
        request,
        another_leads,
    )


def test_the_cluster_stops_and_starts_again_from_its_state(cluster: Settings, tmp_path: Path):
    admin = AdminClient(client_config(cluster.bootstrap_servers))
    # The battery's runs delete their topics as they end; the table's stay.
    before = {t for t in admin.list_topics(timeout=10).topics if not t.startswith("e2e-")}
    assert _cli(cluster, "down").returncode == 0
    assert all(_node(cluster, n).process.running() is None for n in range(1, NODES + 1))
    started = _cli(cluster, "up", "--brokers", str(NODES))
    assert started.returncode == 0, started.stderr
    _wait_all_in_sync(cluster)
    assert before <= set(admin.list_topics(timeout=10).topics)
