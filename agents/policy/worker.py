"""The policy worker: inference requests in, inference events out.

Delivery guarantee: at least once; inference events have the deterministic id
``<episode_id>:<step>:inference`` so consumers drop duplicates. Exactly one inference is emitted
per delivery of a request: a reply that does not parse, a failed or timed-out backend call, a
screenshot that did not arrive within ``image_wait_s`` and a pinned version that cannot be loaded
are each answered with an error inference rather than stalling. Undecodable and out-of-order
requests are dead-lettered, never answered. Every event names the policy version whose weights
produced it (0: the base model), or none for a backend without weights.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, TopicPartition

from agents.policy.backend_call import (
    Backend,
    BackendCall,
    BackendFactory,
    InferTimeout,
    uses_weights,
)
from agents.policy.backends import ChatRequest, Generation, greedy
from agents.policy.inferences import inference_event
from agents.policy.screenshots import (
    ImageCache,
    ScreenshotBackfill,
    StoredScreenshots,
    episode_start_ms,
    resolve_images,
)
from agents.policy.versions import (
    PinnedUnavailable,
    PinnedVersions,
    ServingGate,
    VersionFollower,
)
from infra.consumer import build_consumer, co_partitioned_group, drain
from infra.dead_letters import DeadLetterRouter, OutOfOrderStep
from infra.minio_store import build_minio
from infra.offsets import OffsetTracker
from infra.producer import EventProducer
from infra.screenshot_store import ScreenshotStore
from infra.settings import Settings
from infra.step_reference import StepReference
from infra.topics import event_type
from infra.weights import fetch_weights
from schemas.purpose import is_eval
from schemas.serde import EventDecodeError, SchemaCatalog, default_catalog

log = logging.getLogger(__name__)

# A screenshot missing this long after its request came is read back from the log: normally the
# observation is consumed before the request it answers, or within milliseconds of it.
BACKFILL_AFTER_S = 2.0
# The event type each consumed topic carries, from the topic table.
EXPECTED_TYPES = {"infer": event_type("ops.infer"), "observations": event_type("observations")}


@dataclass
class PolicyWorkerConfig:
    backend_name: str
    policy_name: str = "default"
    group_id: str = "webgym-policy"
    client_id: str = "webgym-policy"
    batch_size: int = 8
    concurrency: int = 1  # batches in flight at once
    image_wait_s: float = 10.0
    infer_timeout_s: float | None = None  # a backend call's limit; None: the settings' value
    # The model versions must be trained from (the manifest's base model); None: not checked.
    base_model: str | None = None
    swap_retry_s: float = 1.0  # a failed swap is tried again after this, doubling up to the max
    swap_retry_max_s: float = 60.0
    status_every_s: float = 60.0  # how often the worker logs its status
    pinned_backends: int = 2  # backends of pinned versions kept (evaluation of frozen versions)


@dataclass
class Pending:
    record: dict[str, Any]
    tp: tuple[str, int]
    offset: int
    received: float


@dataclass
class ServingVersion:
    backend: Backend
    version: int | None  # 0 = the base model, before any published version; None: no weights


NO_VERSION = ServingVersion(backend=None, version=None)  # what an unserved request names


def serving_groups(batch: list[Pending]) -> list[list[Pending]]:
    """The batch split by what serves it (pinned version, greedy or not), in arrival order."""
    groups: dict[tuple[int | None, bool], list[Pending]] = {}
    for item in batch:
        key = (item.record.get("pinned_version"), is_eval(item.record))
        groups.setdefault(key, []).append(item)
    return list(groups.values())


class PolicyWorker:
    """Serves inference requests in batches on one backend, following policy versions.

    The worker is a member of the ``webgym-policy`` consumer group over ``ops.infer`` and
    ``observations``; the range assignor gives it the same partitions of both, so the screenshots
    an episode's requests refer to arrive at the worker that serves them (kept in a bounded
    cache). A screenshot still missing ``BACKFILL_AFTER_S`` after its request came (the
    episode's partition moved here, or a restart resumed past it) is read back from the log
    (:class:`agents.policy.screenshots.ScreenshotBackfill`): an episode's state here is its
    screenshots, so a moved episode goes on. A request waits at most ``image_wait_s`` for its
    screenshots (longer only while their read back runs); after that it is answered with an
    error inference rather than stalling.

    Requests are served in batches on a backend (local ``transformers``, OpenAI-compatible HTTP,
    ...). Every reply is parsed strictly; a reply that does not parse is recorded with its parse
    error. Every event names the policy version whose weights produced it (0: the base model),
    with the temperature and top-p it was drawn with; a backend that uses no weights (scripted,
    heuristic, latency-model) names none, follows no versions, and records no sampling. The
    screenshot cache is :mod:`agents.policy.screenshots`, a backend call with its timeout
    :mod:`agents.policy.backend_call`, the event itself :mod:`agents.policy.inferences`.
    """

    def __init__(
        self,
        settings: Settings,
        config: PolicyWorkerConfig,
        backend_factory: BackendFactory,
        catalog: SchemaCatalog | None = None,
    ):
        self.settings = settings
        self.config = config
        self.backend_factory = backend_factory
        self.catalog = catalog or default_catalog()
        self.topics = {
            settings.topic("ops.infer"): "infer",
            settings.topic("observations"): "observations",
        }
        self.images = ImageCache()
        screenshots = ScreenshotStore(settings)  # observations that keep theirs in MinIO
        self.backfill = ScreenshotBackfill(settings, self.images, screenshots)
        self.stored = StoredScreenshots(screenshots, self.images)
        self.offsets = OffsetTracker()
        self.last_requests = StepReference("infer request")
        self.infer_timeout_s = config.infer_timeout_s or settings.policy_infer_timeout_s
        self.stats = {
            "inferences": 0,
            # inferences / backend_calls: the mean batch (a batch split by version is two calls)
            "backend_calls": 0,
            "parse_errors": 0,
            "backend_errors": 0,  # requests answered without a reply: the backend failed
            "versions_refused": 0,
            "timeouts": 0,  # backend calls answered with errors after infer_timeout_s
            "late_replies_dropped": 0,  # timed-out calls that returned afterwards
            "serving_version": None,  # None: a backend that uses no weights
            "swap_failures": 0,  # swaps that failed for a reason other than a refusal
            "last_swap_error": None,
            "pinned_unavailable": 0,  # requests pinned to a version this worker could not load
        }
        base = backend_factory(None)
        self.serving = ServingVersion(base, 0 if uses_weights(base) else None)
        self.stats["serving_version"] = self.serving.version
        self._serving_lock = threading.Lock()
        self._gate = ServingGate()
        self._finished: queue.SimpleQueue[tuple[tuple[str, int], int]] = queue.SimpleQueue()
        self._fatal: BaseException | None = None
        self._abandoned: set[BackendCall] = set()  # timed out, still running: slots held
        self._abandoned_lock = threading.Lock()
        self._blocked_warned = 0.0
        self._minio: Any = None  # built at the first fetch: MinIO may be down when we start
        self._minio_lock = threading.Lock()
        self.pinned = PinnedVersions(
            config.policy_name,
            config.base_model,
            self._fetch_weights,
            self._build_pinned,
            capacity=config.pinned_backends,
        )

    # -- lifecycle ------------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        self.producer = EventProducer.connect(
            self.settings, client_id=self.config.client_id, **{"linger.ms": 0}
        )
        self.dead_letters = DeadLetterRouter(self.settings, self.producer)
        consumer = build_consumer(
            self.settings,
            group_id=self.config.group_id,
            client_id=self.config.client_id,
            # Same partitions of ops.infer and observations: an episode's screenshots come here.
            **co_partitioned_group(self.settings),
            # Offsets are stored once the inference event is acknowledged; librdkafka commits.
            **{"enable.auto.offset.store": False, "enable.auto.commit": True},
            **{"auto.commit.interval.ms": 500},
        )
        consumer.subscribe(list(self.topics), on_assign=self._on_assign, on_revoke=self._on_revoke)
        follower_stop = threading.Event()
        follower = threading.Thread(
            target=self._follow_versions, args=(follower_stop,), name="versions", daemon=True
        )
        if self.serving.version is None:
            log.info(
                "backend %s uses no weights: its inferences name no policy version, and versions "
                "of %s are not followed",
                self.config.backend_name,
                self.config.policy_name,
            )
        else:
            follower.start()
        pending: list[Pending] = []
        in_flight: list[Any] = []
        status_logged = time.monotonic()
        with ThreadPoolExecutor(max_workers=self.config.concurrency) as pool:
            try:
                while not stop.is_set() and self._fatal is None:
                    if time.monotonic() - status_logged >= self.config.status_every_s:
                        status_logged = time.monotonic()
                        log.info("status: %s", self.status())
                    for message in drain(consumer, 64, 0.05):
                        self._accept(message, pending)
                    for future in [f for f in in_flight if f.done()]:
                        if future.exception() is not None:  # a bug past the backend: crash loudly
                            self._fatal = future.exception()
                    in_flight = [f for f in in_flight if not f.done()]
                    while pending and self._slot_free(len(in_flight)):
                        batch = self._take_ready(pending)
                        if not batch:
                            break
                        in_flight.append(pool.submit(self._serve, batch))
                    self.producer.poll(0)
                    self._store_finished(consumer)
            finally:
                for future in in_flight:
                    future.result()
                self.producer.flush(30)
                self._store_finished(consumer)
                consumer.close()
                self.backfill.close()
                self.stored.close()
                follower_stop.set()
                if follower.is_alive():
                    follower.join(timeout=5)
        if self._fatal is not None:
            raise self._fatal

    def status(self) -> dict[str, Any]:
        """What the worker serves and how it went: the version serving now (None: a backend
        without weights), swaps that failed, versions refused, inference counts.

        Logged every ``status_every_s``: ``serving_version`` says which version serves,
        ``swap_failures`` how many swaps failed.
        """
        return {
            "policy_name": self.config.policy_name,
            "backend": self.config.backend_name,
            **self.stats,
            "screenshot_reads": self.backfill.reads,  # reads back from the log
            "screenshots_read_back": self.backfill.found,
            "screenshots_fetched": self.stored.fetched,  # from the object store
            "screenshots_unavailable": self.stored.failed,
        }

    def _slot_free(self, serving: int) -> bool:
        """May another backend call start? A timed-out call keeps its slot until it returns."""
        with self._abandoned_lock:
            abandoned = len(self._abandoned)
        if serving + abandoned < self.config.concurrency:
            return True
        if abandoned and time.monotonic() - self._blocked_warned > 30:
            self._blocked_warned = time.monotonic()
            log.warning(
                "%d of %d serving slots are held by backend calls past their %g s timeout; they "
                "free when the backend returns (one that never returns needs a worker restart)",
                abandoned,
                self.config.concurrency,
                self.infer_timeout_s,
            )
        return False

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.last_requests.forget({tp.partition for tp in partitions})
        log.info("assigned %s", sorted({tp.partition for tp in partitions}))

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # Their next requests may follow ones another worker took.
        self.last_requests.forget({tp.partition for tp in partitions})

    # -- consuming ------------------------------------------------------------------------------

    def _accept(self, message: Message, pending: list[Pending]) -> None:
        if message.error():
            if message.error().fatal():
                raise RuntimeError(message.error().str())
            log.warning("consumer error (continuing): %s", message.error().str())
            return
        tp, offset = (message.topic(), message.partition()), message.offset()
        self.offsets.started(tp, offset)
        kind = self.topics[message.topic()]
        try:
            record = self.catalog.decode(message.value(), EXPECTED_TYPES[kind]).record
        except EventDecodeError as exc:
            self.dead_letters.route_nowait(message, exc, on_delivery=self._on_delivered(tp, offset))
            return
        wrong = self._out_of_order(record, tp[1]) if kind == "infer" else None
        if wrong is not None:
            self.dead_letters.route_nowait(
                message, OutOfOrderStep(wrong), on_delivery=self._on_delivered(tp, offset)
            )
        elif kind == "observations":
            if record.get("failure") is None:  # a failure observation has no screenshot
                if record.get("screenshot") or not record.get("screenshot_key"):
                    self.images.put(record["event_id"], record["screenshot"])
                else:
                    self.stored.want(record)  # read from the object store in the background
            self._finished.put((tp, offset))
        else:
            pending.append(Pending(record, tp, offset, time.monotonic()))

    def _out_of_order(self, record: dict[str, Any], partition: int) -> str | None:
        """Why a request cannot come from the orchestrator in this order, or None; a request
        that is in order becomes the episode's reference.

        Out-of-order requests are poison (dead-lettered with error class ``OutOfOrderStep``,
        never answered): the orchestrator numbers an episode's requests 1, 2, 3... without a gap,
        sends request k + 1 only once inference k was applied, and a re-sent copy repeats the
        step. So a request at step 0, behind the last one this worker took for its episode, or
        more than one step ahead of it cannot come from it. An episode whose requests this worker
        has not seen since its partition was assigned has no reference; its requests are answered.
        """
        if record["step"] < 1:
            return f"out-of-order infer request: step {record['step']}; requests start at step 1"
        return self.last_requests.refusal(record["episode_id"], record["step"], partition, 1)

    def _take_ready(self, pending: list[Pending]) -> list[Pending]:
        """Up to one batch of requests whose screenshots are here (or waited long enough); asks
        for missing screenshots to be read back from the log once they are overdue."""
        batch = []
        for item in list(pending):
            missing = [
                i for i in item.record["observation_event_ids"] if self.images.get(i) is None
            ]
            waited = time.monotonic() - item.received
            fetching = self.stored.waiting_for(missing)
            if missing and waited > BACKFILL_AFTER_S and not fetching:
                since = episode_start_ms(self.settings, item.record)
                self.backfill.want(item.tp[1], since, missing)
            if not missing or (
                waited > self.config.image_wait_s
                and not fetching
                and not self.backfill.waiting_for(missing)
            ):
                batch.append(item)
                pending.remove(item)
                if len(batch) == self.config.batch_size:
                    break
        return batch

    # -- serving --------------------------------------------------------------------------------

    def _serve(self, batch: list[Pending]) -> None:
        """Answer one batch, exactly one inference per request: a failing or timed-out backend
        call answers it with error inferences, never stalls. Evaluation requests are decoded
        greedily; a request that pins a version is served by exactly that version, or answered
        with an error naming it."""
        for group in serving_groups(batch):
            self._serve_group(group)

    def _serve_group(self, batch: list[Pending]) -> None:
        try:  # outside the gate: building a pinned backend waits for running calls
            pinned = self._pinned_serving(batch[0].record.get("pinned_version"))
        except PinnedUnavailable as exc:
            self.stats["pinned_unavailable"] += len(batch)
            log.warning("%d requests answered with errors: %s", len(batch), exc)
            for item in batch:
                self._emit(item, None, NO_VERSION, backend_error=str(exc)[:500])
            return
        self._gate.enter()  # no swap between choosing the version and calling its backend
        try:
            self._serve_on(batch, pinned, is_eval(batch[0].record))
        finally:
            self._gate.leave()

    def _pinned_serving(self, version: int | None) -> ServingVersion | None:
        """What serves requests pinned to ``version`` (None: the followed version does).

        A request that pins a ``pinned_version`` is served by exactly that version's weights: the
        followed version if it is that one, else a backend of that version
        (:class:`agents.policy.versions.PinnedVersions`: fetched and verified like a followed
        one, the ``pinned_backends`` most recently used kept); a version that cannot be loaded is
        answered with a backend-error inference naming it, never by another version. A backend
        without weights serves pinned requests as any other (its replies name no version).
        """
        if version is None:
            return None
        with self._serving_lock:
            current = self.serving
        if current.version is None:
            return None  # a backend without weights has no versions: its replies name none
        if current.version == version:
            return current  # held on to: a swap meanwhile does not move these requests
        return ServingVersion(self.pinned.backend(version), version)

    def _serve_on(
        self, batch: list[Pending], pinned: ServingVersion | None, evaluation: bool
    ) -> None:
        """Serve ``batch`` on ``pinned`` or the followed version. Evaluation (a request whose
        ``purpose`` is "eval") is decoded greedily, whatever the worker's temperature and top-p
        (:func:`agents.policy.backends.greedy`)."""
        with self._serving_lock:
            serving = pinned or self.serving  # the version in force when the batch starts
        answerable = []
        for item in batch:
            absent = [i for i in item.record["observation_event_ids"] if self.images.get(i) is None]
            if absent:
                error = f"observation {absent[0]} not available to the policy worker"
                self._emit(item, None, serving, error)
            else:
                answerable.append(item)
        if not answerable:
            return
        generations: list[Generation | None] = [None] * len(answerable)
        backend_error = None
        try:
            requests = [
                ChatRequest(
                    resolve_images(json.loads(item.record["messages_json"]), self.images),
                    {key: item.record[key] for key in ("task_id", "episode_id", "step")},
                )
                for item in answerable
            ]
            # Evaluation measures the policy, not the exploration: greedy, whatever the settings.
            backend = greedy(serving.backend) if evaluation else serving.backend
            self.stats["backend_calls"] += 1
            replies = self._generate(backend, requests)
            if len(replies) != len(requests):
                raise RuntimeError(f"{len(replies)} replies to {len(requests)} requests")
            generations = list(replies)
        except InferTimeout as exc:
            self.stats["timeouts"] += 1
            log.warning("batch of %d: %s; answered with errors", len(answerable), exc)
            backend_error = str(exc)
        except Exception as exc:  # noqa: BLE001 - a backend failure must not stall the partition
            log.exception("batch of %d failed", len(answerable))
            backend_error = f"{type(exc).__name__}: {exc}"[:500]
        # Emitted after the call, never inside its error handling: one inference per request.
        for item, generation in zip(answerable, generations, strict=True):
            self._emit(item, generation, serving, backend_error=backend_error)

    def _generate(self, backend: Backend, requests: list[ChatRequest]) -> list[Generation]:
        """One backend call, given ``infer_timeout_s`` (``policy_infer_timeout_s``).

        A failing call, or one with no answer in time, is answered with one error inference per
        request (its ``backend_error`` says why), so the orchestrator asks again within the
        episode's parse-error budget instead of waiting for the lease; a timed-out call's reply,
        if it ever comes, is dropped. The call runs on its own daemon thread; a timed-out call is
        *abandoned*: its cancel event is set (a backend with ``cancellable = True`` takes
        ``generate(requests, cancelled=event)`` and returns at once; the latency-model backend
        does), otherwise its thread runs until the backend returns (threads cannot be killed) and
        then ends. An abandoned call keeps its serving slot until it returns (:meth:`_slot_free`),
        so the backend never has more than ``concurrency`` calls at once (vLLM's engine, for one,
        must not be called from two threads) and abandoned threads cannot pile up; other slots
        keep serving meanwhile. A backend that never returns ends up holding every slot: the
        worker logs a warning, episodes wait up to their lease, and the worker needs a restart.
        """
        self._gate.also()  # the call may outlive this batch (timed out): no swap under it
        try:
            call = BackendCall(backend, requests, on_return=self._call_returned)
        except BaseException:
            self._gate.leave()
            raise
        try:
            return call.result(self.infer_timeout_s)
        except InferTimeout:
            with self._abandoned_lock:
                if call.returned.is_set():  # returned just past the limit: dropped all the same
                    self.stats["late_replies_dropped"] += 1
                else:
                    self._abandoned.add(call)
            raise

    def _call_returned(self, call: BackendCall) -> None:
        with self._abandoned_lock:
            if call in self._abandoned:
                self._abandoned.discard(call)
                self.stats["late_replies_dropped"] += 1
        self._gate.leave()

    def _emit(
        self,
        item: Pending,
        generation: Generation | None,
        serving: ServingVersion,
        error: str | None = None,
        backend_error: str | None = None,
    ) -> None:
        """``error``: why the request went unanswered here (recorded as its parse error);
        ``backend_error``: why the backend gave no reply."""
        event = inference_event(
            item.record,
            generation,
            policy_version=serving.version,
            backend=self.config.backend_name,
            request_at=(item.tp[1], item.offset),
            unanswered=error,
            backend_error=backend_error,
        )
        self.producer.produce(
            self.settings.topic("inferences"),
            item.record["episode_id"],
            "inference",
            event,
            on_delivery=self._on_delivered(item.tp, item.offset),
        )
        self.stats["inferences"] += 1
        if event["parse_error"]:
            self.stats["parse_errors"] += 1
        if backend_error is not None:
            self.stats["backend_errors"] += 1

    def _on_delivered(self, tp: tuple[str, int], offset: int):
        def delivered(error: KafkaError | None, message: Message) -> None:
            if error is not None:
                self._fatal = RuntimeError(f"cannot write inference events: {error.str()}")
                return
            self._finished.put((tp, offset))

        return delivered

    def _store_finished(self, consumer: Consumer) -> None:
        positions = {}
        while True:
            try:
                tp, offset = self._finished.get_nowait()
            except queue.Empty:
                break
            position = self.offsets.finished(tp, offset)
            if position is not None:
                positions[tp] = position
        if positions:
            try:
                consumer.store_offsets(
                    offsets=[TopicPartition(t, p, o) for (t, p), o in positions.items()]
                )
            except Exception as exc:  # noqa: BLE001 - a revoked partition: the next owner redoes it
                log.info("offset store skipped: %s", exc)

    # -- versions -------------------------------------------------------------------------------

    def _follow_versions(self, stop: threading.Event) -> None:
        """Follow the compacted versions topic from the start until ``stop`` (see
        :mod:`agents.policy.versions`); never ends on an error.

        Runs on a separate thread over ``policy.versions``; a newer version of ``policy_name`` is
        fetched from object storage, verified (sha256 of the manifest and of every file) and
        swapped in between backend calls: running calls finish on the version they started with,
        new ones wait while the new backend is built. A version whose weights fail verification,
        or that was trained from another base model than ``base_model``, is refused with a logged
        error; any other failure is logged, counted and retried with backoff, and the last good
        version keeps serving.
        """

        def decode(value: bytes) -> dict[str, Any]:
            event = self.catalog.decode(value, "policy_version").record
            self.pinned.announced(event)  # any announced version may be pinned later
            return event

        follower = VersionFollower(
            self.config.policy_name,
            self.config.base_model,
            self._fetch_weights,
            self._install,
            lambda: self.serving.version,
            self.stats,
            retry_s=self.config.swap_retry_s,
            retry_max_s=self.config.swap_retry_max_s,
        )
        follower.follow(stop, self._open_versions_reader, decode)

    def _fetch_weights(self, event: dict[str, Any]) -> Path:
        """Download and verify the weights a version event announces (cached on disk)."""
        with self._minio_lock:
            if self._minio is None:
                self._minio = build_minio(self.settings)
        return fetch_weights(self._minio, event, self.settings.cache_dir / "weights")

    def _build_pinned(self, weights: Path | None) -> Backend:
        """The backend of a pinned version, built with no backend call running (as a swap)."""
        with self._gate.swap(self.infer_timeout_s):
            return self.backend_factory(weights)

    def _open_versions_reader(self) -> Consumer:
        reader = build_consumer(
            self.settings,
            # A private reader: assigned, never committing, so every worker sees every version.
            group_id=f"{self.config.group_id}-versions-{self.config.client_id}",
            client_id=f"{self.config.client_id}-versions",
        )
        reader.assign([TopicPartition(self.settings.topic("policy.versions"), 0, OFFSET_BEGINNING)])
        return reader

    def _install(self, weights: Path, version: int) -> None:
        """Build the backend of ``weights`` and serve it as ``version``, with no backend call
        running (a call that does not finish within the inference timeout fails the swap)."""
        with self._gate.swap(self.infer_timeout_s):
            backend = self.backend_factory(weights)
            # A backend without weights ignored them: its replies stay attributed to no version.
            served = version if uses_weights(backend) else None
            with self._serving_lock:
                self.serving = ServingVersion(backend, served)
        self.stats["serving_version"] = served
