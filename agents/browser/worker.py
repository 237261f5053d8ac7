"""The browser worker: browser operation events in, observation events out.

Delivery guarantee: at least once; observations have the deterministic id
``<episode_id>:<step>:observation`` and consumers are idempotent on it. An input offset is
committed only after the observation it produced (a failure observation included) was
acknowledged by the broker; the committed position never passes a record still in flight. A
browser that cannot serve an episode is reported as data (a failure observation, at most one per
episode), not as an end; the worker keeps serving. Undecodable and out-of-order operations are
dead-lettered, never run on a page. An episode whose partition moves continues on its new owner,
which rebuilds its page from the log (``agents.browser.migration``); one whose rebuilt page
differs from the log fails with reason ``migration diverged at step k``.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, TopicPartition
from playwright.async_api import async_playwright

from agents.browser.migration import EpisodeLog, read_episode_log
from agents.browser.page_match import page_differences
from agents.browser.pool import BrowserPool, PooledBrowser
from agents.browser.session import (
    SCREENSHOT_TIMEOUT_MS,
    STALL_GRACE_S,
    EpisodeFailure,
    EpisodeSession,
    Snapshot,
    observation_record,
    step_error,
)
from agents.browser.url_policy import UrlPolicy
from infra.consumer import build_consumer, co_partitioned_group, commit_now
from infra.dead_letters import DeadLetterRouter, OutOfOrderStep
from infra.minio_store import ObjectStoreError
from infra.offsets import OffsetTracker
from infra.producer import EventProducer, now_ms
from infra.screenshot_store import ScreenshotStore
from infra.settings import Settings
from infra.step_reference import StepReference
from infra.topics import event_type
from schemas.serde import EventDecodeError, SchemaCatalog, default_catalog

log = logging.getLogger(__name__)
LATEST = -1  # ListOffsets' timestamp for a partition's end
UNKNOWN_END = 2**62  # an end not known: every operation is below it

GROUP_ID = "webgym-browser"
TERMINAL_MEMORY = 100_000  # episode ids remembered as over, to ignore their late operations
# A hand-over waits this long for each cancelled episode and each context to close; what takes
# longer is left behind and named in the log, so a revoke never holds the group for a minute.
HAND_OVER_WAIT_S = 10.0
# The event type each consumed topic carries, from the topic table.
EXPECTED_TYPES = {
    "navigate": event_type("ops.navigate"),
    "act": event_type("ops.act"),
    "episodes": event_type("episodes"),
}


@dataclass
class BrowserWorkerConfig:
    navigate_concurrency: int
    act_concurrency: int
    group_id: str = GROUP_ID
    client_id: str = "webgym-browser"
    chromium_args: list[str] = field(default_factory=list)
    # chrome://crash and chrome://hang open for chaos tests; never for real training runs.
    fault_injection: bool = False

    @classmethod
    def from_settings(cls, settings: Settings, **overrides: Any) -> BrowserWorkerConfig:
        rules = f"MAP *.webgym.test {settings.practice_web_address}"
        config = cls(
            navigate_concurrency=settings.browser_navigate_concurrency,
            act_concurrency=settings.browser_act_concurrency,
            chromium_args=[f"--host-resolver-rules={rules}"],
        )
        for key, value in overrides.items():
            setattr(config, key, value)
        return config


@dataclass
class HeldEpisode:
    session: EpisodeSession
    browser: PooledBrowser
    partition: int
    step: int = 0  # of the last operation answered with an observation
    url: str = ""  # as the last observation showed it
    # Taken over from another worker: the rebuild's ms and the previous owner's last
    # observation's ts, put in the timings of the next observation sent (then None).
    migrated: tuple[float, int] | None = None


@dataclass(frozen=True)
class Operation:
    kind: str  # navigate / act
    record: dict[str, Any]
    tp: tuple[str, int]
    offset: int
    received_ms: int  # wall clock, comparable with the producer's ts
    received: float  # monotonic, for durations inside this worker


def awaiting(task: asyncio.Task) -> str:
    """Where ``task`` waits: each coroutine of its await chain as ``name:line``, outermost
    first, then the type of what the innermost awaits when that is not a coroutine (such as a
    future's iterator)."""
    steps, awaited = [], task.get_coro()
    while getattr(awaited, "cr_frame", None) is not None:
        steps.append(f"{awaited.cr_code.co_name}:{awaited.cr_frame.f_lineno}")
        awaited = awaited.cr_await
    if awaited is not None:
        steps.append(type(awaited).__name__)
    return " > ".join(steps) or "not started"


async def stop_all(tasks: list[asyncio.Task], timeout_s: float) -> list[str]:
    """Cancel ``tasks`` and wait for them, ``timeout_s`` at most; returns where each one still
    running waits (:func:`awaiting`): a task that swallowed its cancellation, or one finishing
    a step it cannot leave."""
    for task in tasks:
        task.cancel()
    if not tasks:
        return []
    _, running = await asyncio.wait(tasks, timeout=timeout_s)
    return [awaiting(task) for task in running]


async def _let_go(episode_id: str, step: str, closing: Awaitable[None]) -> None:
    """Await ``closing``, a step of handing episode ``episode_id`` over, :data:`HAND_OVER_WAIT_S`
    at most; one that takes longer is cancelled and named in the log."""
    try:
        await asyncio.wait_for(closing, HAND_OVER_WAIT_S)
    except TimeoutError:
        log.warning(
            "hand-over of episode %s: %s did not finish within %.0f s; left behind",
            episode_id,
            step,
            HAND_OVER_WAIT_S,
        )


class BrowserWorker:
    """Serves browser operations, one browser context per held episode.

    The worker is one member of the ``webgym-browser`` consumer group over ``ops.navigate``,
    ``ops.act`` and ``episodes``; the range assignor gives a member the same partition numbers of
    every topic, so every operation of an episode reaches the worker that holds its browser
    context. Records of different episodes finish in any order.

    Each operation type has its own concurrency budget, so slow navigations never hold up actions
    of other episodes; the operations of one episode run one at a time, in order. A browser that
    cannot serve an episode (a hang, a crash, a dead browser) is reported as data, not as an end:
    a failure observation (``failure`` set to the reason, no screenshot) and the episode's
    context closed (:meth:`_fail`). The orchestrator is the one writer of terminal ``episodes``
    events: it aborts the episode on the failure observation, and this worker reads ``episodes``
    only to close the context of an episode that finished or was aborted. Each worker reports at
    most one failure per episode and then ignores the episode's late operations.

    Partitions that move (incremental assignment: only those) take their episodes along: the
    worker giving them up closes those contexts without a word (:meth:`_hand_over`), the one
    receiving them rebuilds each episode's page from the log at its next operation
    (:meth:`_take_over`).
    """

    def __init__(
        self, settings: Settings, config: BrowserWorkerConfig, catalog: SchemaCatalog | None = None
    ):
        self.settings = settings
        self.config = config
        self.catalog = catalog or default_catalog()
        self.topics = {
            settings.topic("ops.navigate"): "navigate",
            settings.topic("ops.act"): "act",
            settings.topic("episodes"): "episodes",
        }
        self.held: dict[str, HeldEpisode] = {}
        # Episodes known to have ended (the last TERMINAL_MEMORY): late operations are skipped.
        self.ended_episodes: OrderedDict[str, None] = OrderedDict()
        self.last_taken = StepReference("act op", capacity=TERMINAL_MEMORY)
        self.offsets = OffsetTracker()
        self.stats = {
            "observations": 0,
            "failures": 0,
            "dead_letters": 0,
            "migrations": 0,
            "stored_inline": 0,  # screenshots kept inline because the object store refused them
        }
        # Stored screenshots: written here with screenshot_storage minio; read back by take-overs.
        self.screenshots = ScreenshotStore(settings)
        self._queues: dict[str, asyncio.Queue[Operation]] = {}
        self._runners: dict[str, asyncio.Task] = {}
        self._queue_partition: dict[str, int] = {}
        self._to_store: list[TopicPartition] = []
        self._store_lock = threading.Lock()
        self._assigned: set[int] = set()
        # Per partition held: the end of ops.navigate when it was assigned. A navigate op below
        # it may have been answered by the partition's previous owner (:meth:`_navigated_before`).
        self._navigate_end: dict[int, int] = {}
        self._fatal: BaseException | None = None

    # -- lifecycle ----------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event, ready: asyncio.Event | None = None) -> None:
        """Serve until ``stop`` is set; then leave the group cleanly (its episodes fail)."""
        self.loop = asyncio.get_running_loop()
        self.budgets = {
            "navigate": asyncio.Semaphore(self.config.navigate_concurrency),
            "act": asyncio.Semaphore(self.config.act_concurrency),
        }
        # An episode waits for each observation: send it now rather than batch for 5 ms.
        self.producer = EventProducer.connect(
            self.settings, client_id=self.config.client_id, **{"linger.ms": 0}
        )
        self.dead_letters = DeadLetterRouter(self.settings, self.producer)
        self.consumer = build_consumer(
            self.settings,
            group_id=self.config.group_id,
            client_id=self.config.client_id,
            # Same partition numbers of every topic to one member: ops meet their context. A
            # dead worker's partitions (and episodes) move to the others within 10 s.
            **co_partitioned_group(self.settings),
            # We store offsets ourselves once outputs are acknowledged; librdkafka commits them.
            **{"enable.auto.offset.store": False, "enable.auto.commit": True},
            **{"auto.commit.interval.ms": 500},
        )
        async with async_playwright() as playwright:
            self.pool = BrowserPool(playwright, self.settings, self.config.chromium_args)
            await self.pool.warm()  # before joining: partitions may come with episodes
            threads_stop = threading.Event()
            poller = threading.Thread(target=self._poll_loop, args=(threads_stop,), daemon=True)
            deliveries = threading.Thread(
                target=self._delivery_loop, args=(threads_stop,), daemon=True
            )
            self.consumer.subscribe(
                list(self.topics),
                on_assign=self._on_assign,
                on_revoke=self._on_revoke,
                on_lost=self._on_lost,
            )
            poller.start()
            deliveries.start()
            if ready is not None:
                ready.set()
            stopped = asyncio.ensure_future(stop.wait())
            try:
                while not stop.is_set() and self._fatal is None:
                    await asyncio.wait([stopped], timeout=0.5)
            finally:
                stopped.cancel()
                threads_stop.set()
                await asyncio.to_thread(poller.join)  # leaves the group: hands episodes over
                runners = list(self._runners.values())
                for runner in runners:
                    runner.cancel()
                await asyncio.gather(*runners, return_exceptions=True)
                await asyncio.to_thread(deliveries.join)
                await self.pool.close()
        if self._fatal is not None:
            raise self._fatal

    # -- Kafka threads --------------------------------------------------------------------------

    def _poll_loop(self, stopping: threading.Event) -> None:
        try:
            while not stopping.is_set():
                message = self.consumer.poll(0.1)
                self._store_finished()
                if message is None:
                    continue
                if message.error():
                    if message.error().fatal():
                        raise KafkaException(message.error())
                    log.warning("consumer error (continuing): %s", message.error().str())
                    continue
                asyncio.run_coroutine_threadsafe(self._accept(message), self.loop)
        except BaseException as exc:  # fatal: surface it in run()
            self._fatal = exc
        finally:
            self._store_finished()
            try:
                self.consumer.close()  # leaves the group: on_revoke hands our episodes over
            except KafkaException as exc:
                log.warning("consumer close: %s", exc)

    def _delivery_loop(self, stopping: threading.Event) -> None:
        while not stopping.is_set():
            self.producer.poll(0.1)
        self.producer.flush(30)

    def _store_finished(self) -> None:
        with self._store_lock:
            batch, self._to_store = self._to_store, []
        if not batch:
            return
        try:
            self.consumer.store_offsets(offsets=batch)
        except KafkaException as exc:
            # A partition revoked meanwhile: its next owner redoes the record (at least once).
            log.info("offset store skipped: %s", exc)

    def _on_assign(self, consumer, partitions: list[TopicPartition]) -> None:
        self._assigned |= {tp.partition for tp in partitions}
        navigate = self.settings.topic("ops.navigate")
        latest = [TopicPartition(navigate, tp.partition, LATEST) for tp in partitions
                  if tp.topic == navigate]  # fmt: skip
        if latest:
            try:  # one ListOffsets request for all of them
                ends = consumer.offsets_for_times(latest, timeout=5)
            except KafkaException as exc:  # unknown: every navigate op is looked up
                log.info("end of %s unknown (%s): navigations looked up in the log", navigate, exc)
                ends = [TopicPartition(navigate, tp.partition, UNKNOWN_END) for tp in latest]
            for end in ends:
                known = end.error is None and end.offset >= 0
                self._navigate_end[end.partition] = end.offset if known else UNKNOWN_END
        log.info("assigned %s", sorted({tp.partition for tp in partitions}))

    def _on_revoke(self, consumer, partitions: list[TopicPartition]) -> None:
        log.info("revoked %s", sorted({tp.partition for tp in partitions}))
        self._release(partitions)
        self._store_finished()
        commit_now(consumer)

    def _on_lost(self, consumer, partitions: list[TopicPartition]) -> None:
        log.info("lost %s", sorted({tp.partition for tp in partitions}))
        self._release(partitions)

    def _release(self, partitions: list[TopicPartition]) -> None:
        numbers = {tp.partition for tp in partitions}
        future = asyncio.run_coroutine_threadsafe(self._hand_over(numbers), self.loop)
        try:
            future.result(timeout=60)
        except Exception as exc:  # noqa: BLE001 - a revoke must complete whatever happened
            log.error("releasing partitions %s: %s", sorted(numbers), exc)
        for tp in partitions:
            self.offsets.forget((tp.topic, tp.partition))
        self._assigned -= numbers
        for number in numbers:
            self._navigate_end.pop(number, None)

    # -- event loop -----------------------------------------------------------------------------

    async def _accept(self, message: Message) -> None:
        tp = (message.topic(), message.partition())
        offset = message.offset()
        self.offsets.started(tp, offset)
        kind = self.topics[message.topic()]
        try:
            record = self.catalog.decode(message.value(), EXPECTED_TYPES[kind]).record
        except EventDecodeError as exc:
            self._dead_letter(message, exc, tp, offset)
            return
        if kind != "episodes":
            wrong = self._out_of_order(kind, record, tp[1])
            if wrong is not None:
                self._dead_letter(message, OutOfOrderStep(wrong), tp, offset)
                return
        if kind == "episodes":
            # Terminal events come from the orchestrator (an aborted one often answers our own
            # failure observation): the episode is over here too, its context can go.
            if record["kind"] in ("finished", "aborted"):
                await self._forget_episode(record["episode_id"])
            self._finished(tp, offset)
            return
        episode_id = record["episode_id"]
        queue = self._queues.get(episode_id)
        if queue is None:
            queue = self._queues[episode_id] = asyncio.Queue()
            self._queue_partition[episode_id] = tp[1]
            self._runners[episode_id] = asyncio.ensure_future(self._run_episode(episode_id, queue))
        queue.put_nowait(Operation(kind, record, tp, offset, now_ms(), time.monotonic()))

    def _out_of_order(self, kind: str, record: dict[str, Any], partition: int) -> str | None:
        """Why an operation cannot come from the orchestrator in this order, or None; an
        operation that is in order becomes the episode's reference.

        Out-of-order operations are poison (dead-lettered with error class ``OutOfOrderStep``,
        never run on a page): the orchestrator navigates once, at step 0, then sends act ops of
        rising steps, each at most ``1 + parse_error_budget`` after the one before (an
        unparseable reply asks the policy again without acting) and a re-sent copy repeats a
        step. So a navigate op at another step, and an act op behind the last one this worker
        took for its episode or further ahead than that, cannot come from it. An episode whose
        operations this worker has not seen since its partition was assigned has no reference;
        its operations go through.
        """
        episode_id, step = record["episode_id"], record["step"]
        if kind == "navigate":
            if step != 0:
                return f"out-of-order navigate op: step {step}; an episode navigates only at step 0"
            self.last_taken.take(episode_id, step, partition)
            return None
        return self.last_taken.refusal(
            episode_id, step, partition, most_ahead=1 + self.settings.parse_error_budget
        )

    def _dead_letter(
        self, message: Message, error: BaseException, tp: tuple[str, int], offset: int
    ) -> None:
        """Poison record: to the dead-letter topic; its offset finishes once that is stored."""
        log.warning("poison record %s[%d]@%d: %s", tp[0], tp[1], offset, error)
        self.dead_letters.route_nowait(
            message, error, on_delivery=self._delivery_callback(tp, offset)
        )
        self.stats["dead_letters"] += 1

    async def _run_episode(self, episode_id: str, queue: asyncio.Queue[Operation]) -> None:
        """Serve one episode's operations in order; exits when its queue drains.

        A bug or an unexpected error in one operation fails that episode, never the worker.
        """
        try:
            while True:
                try:
                    operation = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                try:
                    await self._serve(operation)
                except Exception as exc:  # noqa: BLE001 - contained to this episode
                    log.exception("episode %s: unexpected error", episode_id)
                    await self._fail(
                        episode_id,
                        operation.record.get("step", 0),
                        f"browser worker error: {type(exc).__name__}: {exc}"[:500],
                        operation,
                    )
        finally:
            if self._queues.get(episode_id) is queue and queue.empty():
                self._queues.pop(episode_id, None)
                self._runners.pop(episode_id, None)
                self._queue_partition.pop(episode_id, None)

    async def _serve(self, operation: Operation) -> None:
        record = operation.record
        episode_id = record["episode_id"]
        held = self.held.get(episode_id)
        if episode_id in self.ended_episodes:
            self._finished(operation.tp, operation.offset)  # late operation of an ended episode
            return
        if held is None and operation.kind == "act":
            try:
                async with self.budgets["act"]:
                    held = await self._take_over(operation)
            except EpisodeFailure as failure:
                await self._fail(episode_id, record["step"], failure.reason, operation)
                return
            if held is None:  # nothing to serve: answered already, or over on the browser side
                self._finished(operation.tp, operation.offset)
                return
        if held is not None and operation.kind == "navigate" and held.step > 0:
            # A navigate op redelivered after a kill can arrive after the episode's next act op
            # (the two topics are fetched in no order between them): that act op rebuilt the
            # page from the log, so this navigation was answered already. Navigating again
            # would take the page back to its start under a later step.
            log.info(
                "episode %s: its navigate op came after step %d; not navigated again",
                episode_id,
                held.step,
            )
            self._finished(operation.tp, operation.offset)
            return
        if held is None and operation.kind == "navigate":
            async with self.budgets["navigate"]:
                navigated = await self._navigated_before(operation)
            if navigated:
                self._finished(operation.tp, operation.offset)
                return
        timings = {"transit": float(max(0, operation.received_ms - record["ts"]))}
        # Every browser call has its own timeout; this bounds a page that stops answering at all
        # (with the grace a silent page gets while the machine is starved).
        limit_s = record["timeout_ms"] / 1000 + SCREENSHOT_TIMEOUT_MS / 1000 + STALL_GRACE_S + 10
        try:
            async with self.budgets[operation.kind]:
                started = time.monotonic()
                timings["wait"] = (started - operation.received) * 1000
                if held is None:
                    held = await self._open(record, operation.tp[1])
                try:
                    error, snapshot = await asyncio.wait_for(
                        self._operate(held, operation, timings, started), limit_s
                    )
                except TimeoutError as exc:
                    raise EpisodeFailure(f"page stopped answering for {limit_s:.0f} s") from exc
        except EpisodeFailure as failure:
            timings["total"] = (time.monotonic() - operation.received) * 1000
            await self._fail(episode_id, record["step"], failure.reason, operation, timings)
            return
        held.step, held.url = record["step"], snapshot.url
        timings.update(snapshot.timings_ms)
        if held.migrated is not None:
            rebuild_ms, last_ts = held.migrated
            held.migrated = None
            timings["migration"] = rebuild_ms
            timings["migration_pause"] = float(max(0, now_ms() - last_ts))
        timings["total"] = (time.monotonic() - operation.received) * 1000
        await self._emit_observation(record, snapshot, error, timings, operation)

    async def _operate(
        self, held: HeldEpisode, operation: Operation, timings: dict[str, float], started: float
    ) -> tuple[str | None, Snapshot]:
        error = await held.session.apply(operation.kind, operation.record)
        timings[operation.kind] = (time.monotonic() - started) * 1000
        snapshot = await held.session.observe_for(operation.record)
        return step_error(error, snapshot), snapshot

    async def _take_over(self, operation: Operation) -> HeldEpisode | None:
        """Rebuild, from the log, the page of an episode another worker served, to serve
        ``operation`` (an act operation of an episode this worker does not hold).

        The episode's navigation and act operations up to the last one answered run again in a
        fresh context (:func:`agents.browser.migration.read_episode_log`, ``rebuild_plan``),
        each rebuilt page checked against its logged observation with the replay tolerance.
        Returns the episode, held now, to serve ``operation`` from. Returns None, and rebuilds
        nothing, when there is nothing to serve: ``operation`` was answered already (its
        previous owner sent the observation but had not committed the offset; the page is
        rebuilt when the episode's next operation comes, so an episode that ends there costs
        no rebuild and counts no migration), or the log shows the episode over on the browser
        side (a failure observation; the episode is forgotten). Raises EpisodeFailure:
        ``migration diverged at step k`` when the page rebuilt for step k differs from its
        observation, ``browser context lost`` when the log no longer holds the episode's
        navigation (retention).
        """
        record = operation.record
        episode_id, partition = record["episode_id"], operation.tp[1]
        started = time.monotonic()
        history = await self._unserved_history(operation)
        if history is None:
            return None
        if history.navigate is None:
            raise EpisodeFailure(
                "browser context lost: the episode's navigation is no longer in the log "
                "(retention?), so its page cannot be rebuilt"
            )
        plan, reached = history.rebuild_plan(record["step"])
        read_ms = (time.monotonic() - started) * 1000
        held = await self._open(history.navigate, partition)
        for kind, op in plan:
            await held.session.apply(kind, op)
            snapshot = await held.session.observe_for(op)
            differences, _ = page_differences(
                history.pages.get(op["step"]), snapshot.url, snapshot.title, snapshot.screenshot
            )
            if differences:
                raise EpisodeFailure(
                    f"migration diverged at step {op['step']}: {'; '.join(differences)}"[:500]
                )
            held.url = snapshot.url
        held.step = reached
        held.migrated = ((time.monotonic() - started) * 1000, history.pages[reached].ts)
        self.stats["migrations"] += 1
        log.info(
            "episode %s taken over at step %d: %d operations rebuilt in %.0f ms (%.0f ms "
            "reading the log)",
            episode_id,
            record["step"],
            len(plan),
            held.migrated[0],
            read_ms,
        )
        return held

    async def _navigated_before(self, operation: Operation) -> bool:
        """Whether a navigate operation of an episode this worker does not hold needs no
        serving (:meth:`_unserved_history`): answered already by the previous owner of its
        partition, or the episode over. Such an episode is not navigated again: its page is
        rebuilt from the log at its next operation (:meth:`_take_over`), as its act operations
        are. Only operations that were in the log when this worker got the partition can have
        been answered; only those cost a read of the log.
        """
        if operation.offset >= self._navigate_end.get(operation.tp[1], 0):
            return False
        return await self._unserved_history(operation) is None

    async def _unserved_history(self, operation: Operation) -> EpisodeLog | None:
        """The log's records of ``operation``'s episode (its partition, from its start), or
        None when ``operation`` needs no serving: the log holds its step's observation (the
        partition's previous owner answered it, then died or left before committing its
        offset; the page is rebuilt at the episode's next operation, so an episode that ends
        there costs no rebuild), or shows the episode over on the browser side (a failure
        observation; the episode is forgotten)."""
        record = operation.record
        history = await asyncio.to_thread(
            read_episode_log,
            self.settings,
            record["episode_id"],
            operation.tp[1],
            record["ts"],
            self.screenshots,
        )
        if history.failed is not None:
            await self._forget_episode(record["episode_id"])
            return None
        if record["step"] in history.pages:
            log.info(
                "episode %s: step %d came again, answered by its previous owner; its page is "
                "rebuilt at its next operation",
                record["episode_id"],
                record["step"],
            )
            return None
        return history

    async def _open(self, record: dict[str, Any], partition: int) -> HeldEpisode:
        policy = UrlPolicy.for_episode(
            record["url"],
            record["allowed_hosts"],
            self.settings.browser_allow_private_hosts,
            self.config.fault_injection,
        )
        viewport = {"width": record["viewport_width"], "height": record["viewport_height"]}
        pooled = None
        try:
            pooled = await self.pool.acquire()
            session = await EpisodeSession.open(
                pooled.browser,
                record["episode_id"],
                policy,
                viewport,
                self.settings.browser_jpeg_quality,
            )
        except BaseException as exc:
            if pooled is not None:
                await self.pool.release(pooled)
            if isinstance(exc, Exception):
                raise EpisodeFailure(f"could not open a browser context: {exc}") from exc
            raise
        if record["episode_id"] in self.ended_episodes:  # it ended while the context was opening
            await session.close()
            await self.pool.release(pooled)
            raise EpisodeFailure("episode ended while its browser context was opening")
        held = HeldEpisode(session, pooled, partition)
        self.held[record["episode_id"]] = held
        return held

    async def _emit_observation(
        self,
        record: dict[str, Any],
        snapshot: Snapshot,
        error: str | None,
        timings: dict[str, float],
        operation: Operation,
    ) -> None:
        """Send the observation of ``snapshot``. With ``screenshot_storage`` minio its screenshot
        is stored first and the event carries the key; a store that does not take it leaves the
        screenshot inline (logged), so no step is lost to the object store."""
        observation = observation_record(
            record["episode_id"], record["step"], snapshot, action_error=error, timings_ms=timings
        )
        if self.settings.screenshot_storage == "minio" and observation["screenshot"]:
            started = time.perf_counter()
            try:
                observation["screenshot_key"] = await asyncio.to_thread(
                    self.screenshots.put,
                    observation["screenshot"],
                    observation["screenshot_format"],
                    observation["screenshot_sha256"],
                )
                observation["screenshot"] = b""
                timings["store"] = (time.perf_counter() - started) * 1000
            except ObjectStoreError as exc:
                self.stats["stored_inline"] += 1
                log.warning(
                    "episode %s step %d: screenshot kept inline, the object store did not take "
                    "it: %s",
                    record["episode_id"],
                    record["step"],
                    exc,
                )
        self._produce_observation(observation, operation)
        self.stats["observations"] += 1

    def _produce_observation(
        self, observation: dict[str, Any], operation: Operation | None
    ) -> None:
        """Send ``observation``; ``operation``'s offset may be committed once it is acknowledged."""
        self.producer.produce(
            self.settings.topic("observations"),
            observation["episode_id"],
            "observation",
            observation,
            on_delivery=(
                self._delivery_callback(operation.tp, operation.offset) if operation else None
            ),
        )

    async def _fail(
        self,
        episode_id: str,
        step: int,
        reason: str,
        operation: Operation | None,
        timings: dict[str, float] | None = None,
    ) -> None:
        """Emit the episode's one failure observation (at ``step``) and close its context.

        The failure observation is acknowledged before ``operation``'s offset may be committed;
        an episode already over here only finishes ``operation``.

        Which step a failure observation carries, so that it takes the place of the observation
        the episode is waiting for (and is never dropped as a duplicate of one already
        delivered):

        - an operation that failed (hang, crash, no context, unexpected error): that operation's
          step;
        - an episode taken over from another worker whose page cannot be rebuilt (diverged from
          the log, or its navigation gone with retention): the step of the operation that came.

        Partitions revoked or lost fail nothing: their episodes move (:meth:`_hand_over`).
        """
        if episode_id not in self.ended_episodes:
            held = self.held.get(episode_id)
            observation = observation_record(
                episode_id,
                step,
                None,
                timings_ms=timings,
                failure=reason,
                url=held.url if held else "",
            )
            self._produce_observation(observation, operation)
            self.stats["failures"] += 1
            log.info("episode %s failed at step %d: %s", episode_id, step, reason)
        elif operation is not None:
            self._finished(operation.tp, operation.offset)
        await self._forget_episode(episode_id)

    async def _forget_episode(self, episode_id: str) -> None:
        self.ended_episodes[episode_id] = None
        if len(self.ended_episodes) > TERMINAL_MEMORY:
            self.ended_episodes.popitem(last=False)
        held = self.held.pop(episode_id, None)
        if held is not None:
            await held.session.close()
            await self.pool.release(held.browser)

    async def _hand_over(self, partitions: set[int]) -> None:
        """Give up everything on ``partitions``: their episodes go on with the partitions' next
        owner, which rebuilds their pages from the log (:meth:`_take_over`).

        Operations not yet answered are dropped: their offsets are not committed, so the next
        owner gets them. The contexts held on those partitions close without a failure
        observation, and the episodes are not remembered as ended (the partitions may come
        back). Returns once every observation already produced is acknowledged (30 s at most),
        so the next owner finds them in the log. An episode that does not stop, or a context that
        does not close, within :data:`HAND_OVER_WAIT_S` is left behind and named in the log: the
        revoke holds the partitions' next owner until it returns.
        """
        self.last_taken.forget(partitions)  # their next operations may follow another's
        runners = []
        for episode_id, partition in list(self._queue_partition.items()):
            if partition in partitions:
                runner = self._runners.pop(episode_id, None)
                self._queues.pop(episode_id, None)
                self._queue_partition.pop(episode_id, None)
                if runner is not None:
                    runners.append(runner)
        for where in await stop_all(runners, HAND_OVER_WAIT_S):
            log.warning(
                "hand-over of %s: a cancelled episode still runs after %.0f s, at %s; left behind",
                sorted(partitions),
                HAND_OVER_WAIT_S,
                where,
            )
        for episode_id, held in list(self.held.items()):
            if held.partition in partitions:
                del self.held[episode_id]
                await _let_go(episode_id, "its browser context", held.session.close())
                await _let_go(episode_id, "its browser's release", self.pool.release(held.browser))
        await asyncio.to_thread(self.producer.flush, 30)

    def _delivery_callback(self, tp: tuple[str, int], offset: int):
        def delivered(error: KafkaError | None, message: Message) -> None:
            if error is not None:
                self._fatal = KafkaException(error)  # an output we cannot write: stop loudly
                return
            if not self.loop.is_closed():
                self.loop.call_soon_threadsafe(self._finished, tp, offset)

        return delivered

    def _finished(self, tp: tuple[str, int], offset: int) -> None:
        position = self.offsets.finished(tp, offset)
        if position is not None:
            with self._store_lock:
                self._to_store.append(TopicPartition(tp[0], tp[1], position))
