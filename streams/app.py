"""The Faust app: every stream processor of the rollout loop, started with

    faust -A streams.app worker -l info

Delivery guarantee: at least once, on the ``kafka://`` (aiokafka) driver. Every produced record
(outputs and table changelogs) is flushed before input offsets are committed (Faust's flush, with
the buffer of ``streams.producer``, which waits for all of them); every handler is
idempotent on ``event_id`` and re-sends the outputs of the last input it applied when that input
comes again (see ``streams.orchestrator``), so a worker killed at any point loses no episode, and
downstream consumers drop the duplicates by their deterministic ids. Poison records go to
``webgym.dlq`` with their source coordinates; the stream moves on. So do well-formed events the
orchestrator finds out of order (error class ``OutOfOrderStep``): they change no episode.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import faust
from aiokafka.partitioner import DefaultPartitioner
from faust.transport.drivers import aiokafka as faust_aiokafka

from infra.dead_letters import OutOfOrderStep, dead_letter
from infra.settings import Settings, load_settings
from infra.topic_admin import (
    PartitionMismatch,
    ReplicationTooHigh,
    replication,
    require_partition_counts,
)
from infra.topics import LARGE_MESSAGE_BYTES, MIB, TOPICS
from schemas.serde import EventDecodeError, default_catalog
from streams.judging import Judging
from streams.orchestrator import Output, Rules, Transition
from streams.processors import curriculum as on_curriculum
from streams.processors import episodes as on_episodes
from streams.processors import inferences as on_inferences
from streams.processors import judge, leases
from streams.processors import observations as on_observations
from streams.processors import scored as on_scored
from streams.producer import IdempotentProducer
from streams.row_codec import TABLE_SERIALIZER
from tasks.catalog import TaskCatalog

log = logging.getLogger("streams")

# Agents (one per input stream; ``WEBGYM_STREAMS_AGENTS`` picks a subset, e.g. ``judge``; the
# workers of one deployment must all run the same subset, which names the consumer group):
# - ``orchestrator``: episodes, observations and inferences -> navigate / infer / act operations,
#   terminal episode events and trajectories (the assembler), a lease timer;
# - ``judge``: trajectories -> scored trajectories (verifier or LLM rubric judge, concurrently);
# - ``filter``: scored trajectories -> the success stream, blocked-site notices;
# - ``sampler``: curriculum notices -> ``started`` episodes, N in flight.
AGENT_SETS = ("orchestrator", "judge", "filter", "sampler")
ENDED_KEPT_MS = 10 * 60 * 1000  # an ended episode's row stays this long to absorb late events

# What ``Streams.agent`` hands each decoded input to: the record, and its event (for its offset).
RecordHandler = Callable[[dict[str, Any], faust.types.EventT], Awaitable[None]]


# How long the consumer's fetch may wait for data at the broker. Faust passes 1500 ms and offers
# no setting; a broker answers one request per connection at a time, so a ListOffsets request
# (table recovery asks two after every rebalance) waited behind an idle fetch for up to that
# long: 3 s from assignment to ready. At 200 ms an idle consumer asks a little more often.
FETCH_MAX_WAIT_MS = 200


class ConsumerThread(faust_aiokafka.AIOKafkaConsumerThread):
    """Faust's consumer thread, whose worker consumer waits at most :data:`FETCH_MAX_WAIT_MS`
    for a fetch (read when the consumer starts, so it is set on the consumer just built)."""

    def _create_worker_consumer(self, transport: Any) -> Any:
        consumer = super()._create_worker_consumer(transport)
        consumer._fetch_max_wait_ms = FETCH_MAX_WAIT_MS
        return consumer


class Consumer(faust_aiokafka.Consumer):
    def _new_consumer_thread(self) -> ConsumerThread:
        return ConsumerThread(self, loop=self.loop, beacon=self.beacon)


class Transport(faust_aiokafka.Transport):
    Producer = IdempotentProducer
    Consumer = Consumer


class StreamsApp(faust.App):
    def _new_transport(self):
        return Transport(self.conf.broker_consumer, self, loop=self.loop)


class KeyPartitionedTable(faust.Table):
    """A table whose row for key k lives in partition murmur2(k), like every event keyed k.

    All episode-keyed topics share one partition count and the murmur2 partitioner, and the
    ``episodes`` table writes its changelog by the same partitioner, so a worker holds the table
    rows of exactly the episodes whose events it consumes.

    Faust's default puts a row in the partition of the event being processed, which needs an
    event (timers have none); its ``use_partitioner`` asks the producer, which may not have the
    changelog's metadata yet. Both give the same answer as this for episode-keyed events.
    """

    _partitioner = DefaultPartitioner()

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        # Rows are rewritten whole at every step: their changelog is compressed (Faust takes the
        # serializer from the value type, so it is set here, before the store and changelog).
        self.value_serializer = TABLE_SERIALIZER

    def partition_for_key(self, key: Any) -> int:
        partitions = list(range(self.partitions))
        return self._partitioner(key, partitions, partitions)


def keyed_table(app: faust.App, name: str, partitions: int) -> faust.Table:
    table = KeyPartitionedTable(
        app,
        name=name,
        default=None,
        partitions=partitions,
        key_type=bytes,
        beacon=app.tables.beacon,
        # Roll segments hourly so compaction can drop ended rows: a restarted worker recovers
        # the live episodes, not the whole history.
        extra_topic_configs={"segment.ms": str(60 * 60 * 1000)},
    )
    return app.tables.add(table)


def agent_sets() -> tuple[str, ...]:
    chosen = os.environ.get("WEBGYM_STREAMS_AGENTS", "").strip()
    if not chosen or chosen == "all":
        return AGENT_SETS
    names = tuple(sorted({name.strip() for name in chosen.split(",") if name.strip()}))
    unknown = set(names) - set(AGENT_SETS)
    if unknown:
        raise SystemExit(
            f"WEBGYM_STREAMS_AGENTS names unknown agents {sorted(unknown)}; "
            f"choose from {', '.join(AGENT_SETS)} (or 'all')"
        )
    return names


def app_id(settings: Settings, sets: tuple[str, ...]) -> str:
    base = f"{settings.topic_prefix}-streams"
    return base if sets == AGENT_SETS else f"{base}-{'-'.join(sets)}"


def build_app(settings: Settings, sets: tuple[str, ...]) -> faust.App:
    name = app_id(settings, sets)
    datadir = settings.state_dir / "faust" / name
    datadir.mkdir(parents=True, exist_ok=True)
    brokers = [f"kafka://{server}" for server in settings.bootstrap_servers.split(",")]
    return StreamsApp(
        name,
        broker=brokers,
        store="memory://",
        processing_guarantee="at_least_once",
        key_serializer="raw",
        value_serializer="raw",
        topic_partitions=settings.default_partitions,
        topic_replication_factor=settings.replication_factor or 1,  # the cluster's at start
        topic_disable_leader=True,  # no leader-only timers: one fewer internal topic
        table_standby_replicas=0,  # a timer must only see rows of partitions it owns
        # A dead worker's partitions move within seconds, not Kafka's default 45 s.
        broker_session_timeout=settings.streams_session_timeout_s,
        broker_heartbeat_interval=1.0,
        broker_rebalance_timeout=2 * settings.streams_session_timeout_s,
        stream_recovery_delay=0.2,  # start processing right after a rebalance
        producer_acks=-1,
        producer_linger=settings.streams_linger_ms / 1000,
        producer_max_request_size=LARGE_MESSAGE_BYTES + MIB,
        consumer_max_fetch_size=LARGE_MESSAGE_BYTES + MIB,
        # `faust worker` serves its status pages unless --without-web: on loopback only, and
        # give each worker on one host its own --web-port.
        web_bind="127.0.0.1",
        web_host="127.0.0.1",
        datadir=str(datadir),
    )


class Streams:
    """The app with its topics, tables and shared helpers; agents are registered by ``wire``."""

    def __init__(self, settings: Settings, sets: tuple[str, ...]):
        self.settings = settings
        self.sets = sets
        self.app = build_app(settings, sets)
        self.schemas = default_catalog()
        self.rules = Rules.from_settings(settings)
        self.catalog = TaskCatalog(settings, self.schemas)
        self.topics = {
            spec.suffix: self.app.topic(
                spec.name(settings),
                partitions=spec.partition_count(settings),
                key_type=bytes,
                value_type=bytes,
                internal=False,
            )
            for spec in TOPICS
        }
        # raw key bytes: the row of episode e lives in the partition of e's events
        self.episodes = keyed_table(self.app, "episodes", settings.default_partitions)
        self.sampler = keyed_table(self.app, "curriculum", 1)
        self._partitioner = DefaultPartitioner()

    # -- shared helpers ---------------------------------------------------------------------------

    def agent(
        self, suffix: str, expected: str, *, name: str, concurrency: int = 1
    ) -> Callable[[RecordHandler], RecordHandler]:
        """Register the decorated ``handler(record, event)`` as Faust agent ``name`` on topic
        ``suffix``: each event is decoded as ``expected`` and its record handed over, one event
        at a time per actor (``concurrency`` actors). A poison record goes to the dead-letter
        topic and the stream moves on. At least once: an input's offset is committed only after
        the handler has returned for it and for every earlier input, and what it queued is
        flushed first; so a handler must be idempotent on ``event_id``."""

        def register(handler: RecordHandler) -> RecordHandler:
            @functools.wraps(handler)  # Faust labels and documents the agent by its function
            async def consume(stream: faust.StreamT) -> None:
                async for event in stream.events():
                    record = await self.decode(event, expected)
                    if record is not None:
                        await handler(record, event)

            self.app.agent(self.topics[suffix], name=name, concurrency=concurrency)(consume)
            return handler

        return register

    async def decode(self, event: faust.types.EventT, expected: str) -> dict[str, Any] | None:
        """The event's record, or None after routing a poison record to the dead-letter topic."""
        try:
            return self.schemas.decode(event.message.value, expected).record
        except EventDecodeError as error:
            await self.dead_letter(event, error)
            return None

    async def dead_letter(self, event: faust.types.EventT, error: Exception) -> None:
        """Route the event's record to the dead-letter topic (queued like any output)."""
        message = event.message
        record, headers = dead_letter(
            message.topic, message.partition, message.offset, message.key, message.value, error
        )
        log.warning(
            "poison record %s[%d]@%d -> dlq: %s",
            message.topic,
            message.partition,
            message.offset,
            error,
        )
        await self.topics["dlq"].send(
            key=message.key, value=self.schemas.encode("dead_letter", record), headers=headers
        )

    async def send(self, outputs: list[Output]) -> None:
        """Queue the outputs; Faust flushes them before it commits any input offset."""
        for output in outputs:
            value = self.schemas.encode(output.event_type, output.record)
            await self.topics[output.topic].send(key=output.key.encode(), value=value)

    async def task(self, task_id: str) -> dict[str, Any] | None:
        return self.catalog.cached(task_id) or await asyncio.to_thread(self.catalog.get, task_id)

    def owned_partitions(self, suffix: str) -> set[int]:
        """The partitions of topic ``suffix`` this worker holds now."""
        name = self.topics[suffix].get_topic_name()
        return {tp.partition for tp in self.app.consumer.assignment() if tp.topic == name}

    def partition_of(self, suffix: str, key: str) -> int:
        partitions = list(range(self.topics[suffix].partitions or self.settings.default_partitions))
        return self._partitioner(key.encode(), partitions, partitions)

    def row(self, episode_id: str) -> dict[str, Any] | None:
        return self.episodes.get(episode_id.encode())

    def rows(self) -> list[tuple[str, dict[str, Any]]]:
        return [(key.decode(), state) for key, state in list(self.episodes.items())]

    def set_row(self, episode_id: str, state: dict[str, Any] | None) -> None:
        if state is None:
            del self.episodes[episode_id.encode()]
        else:
            self.episodes[episode_id.encode()] = state

    async def apply(
        self, episode_id: str, transition: Transition, event: faust.types.EventT | None = None
    ) -> None:
        """Write the new row (if any), then send the outputs (Faust flushes both before commit);
        an input the rules rejected (``event``) goes to the dead-letter topic instead."""
        if transition.rejected is not None:
            if event is None:
                raise ValueError(f"episode {episode_id}: a rejected input needs its event")
            await self.dead_letter(event, OutOfOrderStep(transition.rejected))
            return
        if transition.changed and transition.state is not None:
            self.set_row(episode_id, transition.state)
        await self.send(transition.outputs)


def wire(streams: Streams) -> None:
    """Register the agents of the chosen sets on the app."""
    if "orchestrator" in streams.sets:
        on_episodes.register(streams)
        on_observations.register(streams)
        on_inferences.register(streams)
        leases.register(streams, ENDED_KEPT_MS)
    if "judge" in streams.sets:
        judge.register(streams, Judging(streams.settings))
    if "filter" in streams.sets:
        on_scored.register(streams)
    if "sampler" in streams.sets:
        on_curriculum.register(streams)


def refuse_mismatched_partitions(streams: Streams) -> None:
    """`faust worker` checks the topics' partition counts against the table before it joins the
    group, and exits 1 with a one-line reason on a mismatch (its tables would pair an episode's
    events on different partitions). It also replicates its changelog topics as the table's
    topics are on this cluster (:func:`infra.topic_admin.replication`)."""

    @streams.app.on_worker_init.connect
    def check(app: faust.App, **kwargs: Any) -> None:
        try:
            require_partition_counts(streams.settings)
            app.conf.topic_replication_factor = replication(streams.settings).factor
        except (PartitionMismatch, ReplicationTooHigh) as exc:
            print(f"error: {exc}", file=sys.stderr, flush=True)
            raise SystemExit(1) from None


def create(settings: Settings | None = None, sets: tuple[str, ...] | None = None) -> Streams:
    streams = Streams(settings or load_settings(), sets or agent_sets())
    wire(streams)
    refuse_mismatched_partitions(streams)
    return streams


streams = create()
app = streams.app
