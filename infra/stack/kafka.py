"""The local Apache Kafka on the installed JDK: one KRaft node (broker + controller), or a
cluster of N such nodes on loopback (``webgym up --brokers 3``), each its own process.

Jars come from Maven Central: ``pom.xml`` beside this file names the broker artifact and Maven
copies it, with its dependencies, into the cache dir (once per pom content). Storage is
formatted on first start with a cluster id kept in the state dir; a cluster's nodes share one id
and one static controller quorum (every node votes), so one node of three may be lost.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import uuid
from base64 import urlsafe_b64encode
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from infra.kafka_config import WORKER_SESSION_TIMEOUT_MS, client_config
from infra.settings import Settings
from infra.stack.process import LocalService, StackError, split_host_port

POM = Path(__file__).parent / "pom.xml"
START_TIMEOUT_S = 90.0
# What a first fetch moves (45 jars into an empty ~/.m2) and roughly takes on a good connection:
# said before it starts.
FETCH_TAKES = "about 45 MB, a minute or so"

# The broker logs to its console, which the stack appends to ``logs/kafka.log``. Left out: the
# INFO lines of the controller, the metadata publisher and the group coordinator's clean-up (one
# per offsets partition): several hundred lines per topic created or deleted, 84% of the bytes
# of the log on a stack the tests use. Their warnings stay, and so do the groups' rebalances.
LOG4J2 = """\
rootLogger.level=INFO
rootLogger.appenderRef.stdout.ref=STDOUT
appender.stdout.type=Console
appender.stdout.name=STDOUT
appender.stdout.layout.type=PatternLayout
appender.stdout.layout.pattern=[%d] %p %m (%c)%n
logger.kafka.name=kafka
logger.kafka.level=INFO
logger.state.name=state.change.logger
logger.state.level=WARN
logger.controller.name=org.apache.kafka.controller
logger.controller.level=WARN
logger.metadata.name=kafka.server.metadata
logger.metadata.level=WARN
logger.groupshard.name=org.apache.kafka.coordinator.group.GroupCoordinatorShard
logger.groupshard.level=WARN
"""


def kafka_version() -> str:
    match = re.search(r"<kafka.version>([^<]+)</kafka.version>", POM.read_text())
    if not match:
        raise StackError(f"{POM} does not name kafka.version")
    return match.group(1)


def _jar_dir(settings: Settings) -> Path:
    digest = hashlib.sha256(POM.read_bytes()).hexdigest()[:12]
    return settings.cache_dir / "kafka" / f"{kafka_version()}-{digest}"


def jars_cached(settings: Settings) -> bool:
    return (_jar_dir(settings) / ".complete").exists()


def fetch_jars(settings: Settings, report: Callable[[str], None] = lambda line: None) -> Path:
    """Resolve the broker jars through Maven into the cache; a no-op when already there. A fetch
    says what it does and how long it takes to ``report`` before it starts, and when it is done."""
    target = _jar_dir(settings)
    if (target / ".complete").exists():
        return target
    mvn = shutil.which("mvn")
    if mvn is None:
        raise StackError(
            "Maven (mvn) is not installed; it fetches the Kafka jars from Maven Central. "
            "Install it with `apt-get install maven` and run `webgym up` again."
        )
    report(
        f"fetching the Apache Kafka {kafka_version()} jars from Maven Central with {mvn} "
        f"(first time only, {FETCH_TAKES})..."
    )
    started = time.monotonic()
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
        libs = Path(scratch) / "libs"
        result = subprocess.run(
            [
                mvn,
                "-B",
                "-q",
                "-f",
                str(POM),
                "dependency:copy-dependencies",
                f"-DoutputDirectory={libs}",
                "-DincludeScope=runtime",
            ],
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            raise StackError(
                "Maven could not fetch the Kafka jars from Maven Central "
                f"(exit {result.returncode}):\n{(result.stdout + result.stderr)[-2000:]}\n"
                "Check that Maven Central is reachable (proxy settings in ~/.m2/settings.xml)."
            )
        (libs / ".complete").write_text(kafka_version())
        shutil.rmtree(target, ignore_errors=True)
        libs.rename(target)
    report(f"fetched the Kafka jars in {time.monotonic() - started:.0f} s, cached in {target}")
    return target


def new_cluster_id() -> str:
    """A random base64url UUID, as Kafka's own tool makes them (never starting with '-')."""
    while True:
        cluster_id = urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def _java() -> str:
    java = shutil.which("java")
    if java is None:
        raise StackError(
            "Java is not installed; Kafka 4 needs Java 17 or newer. Install it with "
            "`apt-get install openjdk-17-jre-headless` and run `webgym up` again."
        )
    return java


CLUSTER_DIR = "kafka-cluster"  # a cluster's nodes live in node-<N>/ below it
PORT_STEP = 10  # node N listens PORT_STEP * (N - 1) above node 1 (broker and controller ports)


def node_addresses(settings: Settings, nodes: int) -> list[str]:
    """The broker address of each node: the bootstrap servers when they list ``nodes`` or more,
    else the first one's port and every ``PORT_STEP`` above it."""
    listed = [a.strip() for a in settings.bootstrap_servers.split(",") if a.strip()]
    if len(listed) >= nodes:
        return listed[:nodes]
    host, port = split_host_port(listed[0], "WEBGYM_BOOTSTRAP_SERVERS")
    return [f"{host}:{port + PORT_STEP * n}" for n in range(nodes)]


def cluster_size(settings: Settings) -> int | None:
    """The node count of the cluster formatted in the state dir, if there is one."""
    recorded = settings.state_dir / CLUSTER_DIR / "nodes"
    return int(recorded.read_text()) if recorded.exists() else None


class LocalKafka(LocalService):
    """Node ``node`` of a local cluster of ``nodes`` (1: the one-node stack, named ``kafka``)."""

    start_timeout_s = START_TIMEOUT_S

    def __init__(self, settings: Settings, node: int = 1, nodes: int = 1):
        name = "kafka" if nodes == 1 else f"kafka-{node}"
        address = node_addresses(settings, nodes)[node - 1]
        label = "Kafka" if nodes == 1 else f"Kafka node {node}"
        super().__init__(settings, name, label, address, "WEBGYM_BOOTSTRAP_SERVERS")
        if nodes > 1:
            self.home = settings.state_dir / CLUSTER_DIR / f"node-{node}"
        self.node, self.nodes = node, nodes
        self.controller_port = settings.local_kafka_controller_port + PORT_STEP * (node - 1)

    @property
    def ports(self) -> list[int]:
        return [self.port, self.controller_port]

    def preflight(self) -> None:
        """Fail early, with the fix, when a tool this start needs is missing."""
        _java()
        if not jars_cached(self.settings) and shutil.which("mvn") is None:
            fetch_jars(self.settings)  # raises the Maven message

    def server_properties(self) -> str:
        data = self.home / "data"
        base = self.settings.local_kafka_controller_port
        voters = ",".join(
            f"{n}@{self.host}:{base + PORT_STEP * (n - 1)}" for n in range(1, self.nodes + 1)
        )
        # Internal topics (offsets, transactions) replicated as the table's topics are.
        factor = min(3, self.nodes)
        min_isr = max(1, factor - 1)
        return "\n".join(
            [
                "process.roles=broker,controller",
                f"node.id={self.node}",
                f"controller.quorum.voters={voters}",
                f"listeners=PLAINTEXT://{self.host}:{self.port},"
                f"CONTROLLER://{self.host}:{self.controller_port}",
                f"advertised.listeners=PLAINTEXT://{self.host}:{self.port}",
                "controller.listener.names=CONTROLLER",
                "inter.broker.listener.name=PLAINTEXT",
                "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                f"log.dirs={data}",
                f"offsets.topic.replication.factor={factor}",
                f"transaction.state.log.replication.factor={factor}",
                f"transaction.state.log.min.isr={min_isr}",
                f"share.coordinator.state.topic.replication.factor={factor}",
                f"share.coordinator.state.topic.min.isr={min_isr}",
                # Topics created without these (Faust's changelogs) get the table's replication.
                f"default.replication.factor={factor}",
                f"min.insync.replicas={min_isr}",
                # Tests and restarts should not wait 3 s for a group to settle.
                "group.initial.rebalance.delay.ms=0",
                # Consumer-protocol groups (the browser and policy workers): a dead member's
                # partitions move within 10 s, and assignment changes reach members within 1 s.
                f"group.consumer.min.session.timeout.ms={WORKER_SESSION_TIMEOUT_MS}",
                f"group.consumer.session.timeout.ms={WORKER_SESSION_TIMEOUT_MS}",
                "group.consumer.min.heartbeat.interval.ms=1000",
                "group.consumer.heartbeat.interval.ms=1000",
                f"num.partitions={self.settings.default_partitions}",
                # Our topics are created from the table; a typo must not create a topic.
                "auto.create.topics.enable=false",
                # Screenshots: the broker-wide cap must admit the largest topic's messages.
                "message.max.bytes=17825792",
                "",
            ]
        )

    def start(self, libs: Path) -> None:
        java = _java()
        self.home.mkdir(parents=True, exist_ok=True)
        properties = self.home / "server.properties"
        properties.write_text(self.server_properties())
        log4j = self.home / "log4j2.properties"
        log4j.write_text(LOG4J2)
        classpath = f"{libs}/*"
        if not (self.home / "data" / "meta.properties").exists():
            self._format(java, classpath, properties)
        env = dict(os.environ)
        env.pop("CLASSPATH", None)
        command = [
            java,
            f"-Xmx{self.settings.local_kafka_heap}",
            "-Xms128m",
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={log4j}",
            "-cp",
            classpath,
            "kafka.Kafka",
            str(properties),
        ]
        self.process.start(command, env, self.address, self.home)

    def _format(self, java: str, classpath: str, properties: Path) -> None:
        cluster_file = self.home / "cluster.id"
        if self.nodes > 1:  # one id for every node, and the node count beside it
            cluster_file = self.home.parent / "cluster.id"
            (self.home.parent / "nodes").write_text(str(self.nodes))
        if not cluster_file.exists():
            cluster_file.write_text(new_cluster_id())
        result = subprocess.run(
            [
                java,
                "-cp",
                classpath,
                "kafka.tools.StorageTool",
                "format",
                "--ignore-formatted",
                # One token: an id may start with '-', which a separate argument would make a flag.
                f"--cluster-id={cluster_file.read_text().strip()}",
                "-c",
                str(properties),
            ],
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            raise StackError(
                f"formatting Kafka storage in {self.home / 'data'} failed:\n"
                f"{(result.stdout + result.stderr)[-2000:]}\n"
                f"If the directory is from another Kafka version, remove {self.home} and retry."
            )

    def quorum_state(self) -> tuple[int, int] | None:
        """(leader epoch, leader id) of the metadata quorum as this node last wrote it."""
        path = self.home / "data" / "__cluster_metadata-0" / "quorum-state"
        try:
            state = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        return state.get("leaderEpoch", -1), state.get("leaderId", -1)

    def healthy(self) -> bool:
        # A refused connection is the expected answer while the broker starts: client_config
        # keeps librdkafka's line about it off stderr.
        admin = AdminClient(client_config(self.address, {"socket.timeout.ms": 2000}))
        try:
            admin.list_topics(timeout=2)
        except KafkaException:
            return False
        return True
