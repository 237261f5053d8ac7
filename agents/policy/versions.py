"""Following a policy's versions: which announced version a worker serves, and swapping it in.

:class:`VersionFollower` reads the compacted ``policy.versions`` topic from the start and keeps
the worker on the newest version of its policy name that it can serve. Guarantees: only newer
versions of its policy name are taken (of several announced meanwhile, only the newest is
fetched); a version of another base model or whose weights fail verification is refused for
good; any other failure is retried with backoff while the last good version keeps serving; it
never dies of an error, and only ``stop`` ends it (details: :class:`VersionFollower`).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

from infra.weights import WeightsRejected
from schemas.serde import EventDecodeError

log = logging.getLogger(__name__)


class VersionReader(Protocol):
    """What the follower needs of a Kafka consumer assigned to ``policy.versions``."""

    def poll(self, timeout: float) -> Any: ...

    def close(self) -> None: ...


def same_base_model(announced: str, own: str) -> bool:
    """Does a version trained from ``announced`` fit a worker serving ``own``? The same name,
    or two paths of one local directory."""
    if announced == own:
        return True
    a, b = Path(announced).expanduser(), Path(own).expanduser()
    return a.is_dir() and b.is_dir() and a.resolve() == b.resolve()


class Backoff:
    """Delays that double from ``first_s`` up to ``max_s``; :meth:`reset` starts again."""

    def __init__(self, first_s: float, max_s: float):
        self.first_s, self.max_s = first_s, max(max_s, first_s)
        self._next = first_s

    def next(self) -> float:
        delay, self._next = self._next, min(self._next * 2, self.max_s)
        return delay

    def reset(self) -> None:
        self._next = self.first_s


class VersionFollower:
    """Decides and performs swaps; the worker supplies how to fetch and how to install.

    ``fetch(event)`` downloads and verifies a version's weights (a directory); ``install(path,
    version)`` builds the backend for it and makes it the serving one (or raises: the old one
    keeps serving); ``serving_version()`` is the version serving now. ``stats`` is the worker's
    stats dict: ``versions_refused``, ``swap_failures`` and ``last_swap_error`` are kept there.

    - only versions of its policy name newer than the one serving are taken; of several
      announced meanwhile, only the newest is fetched;
    - a version trained from another base model than the worker's own, or whose weights fail
      verification (:class:`infra.weights.WeightsRejected`), is *refused*: logged as an error,
      counted in ``versions_refused``, and never tried again;
    - any other failure (object storage unreachable, an S3 error, out of memory while loading, a
      backend that cannot be built, calls that do not finish) is a *swap failure*: logged with
      its cause, counted in ``swap_failures``, kept in ``last_swap_error``, and tried again after
      a backoff that doubles from ``retry_s`` up to ``retry_max_s``, while the last good version
      keeps serving. A newer announcement replaces the one being retried, and is tried at once;
    - it never dies of an error: failures to read the topic itself are logged and the reader is
      opened again after a backoff. Only ``stop`` ends it.
    """

    def __init__(
        self,
        policy_name: str,
        base_model: str | None,
        fetch: Callable[[dict[str, Any]], Path],
        install: Callable[[Path, int], None],
        serving_version: Callable[[], int | None],
        stats: dict[str, Any],
        retry_s: float = 1.0,
        retry_max_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.policy_name = policy_name
        self.base_model = base_model  # None: not checked (workers built without one, in tests)
        self._fetch, self._install, self._serving_version = fetch, install, serving_version
        self.stats = stats
        for key in ("versions_refused", "swap_failures"):
            stats.setdefault(key, 0)
        stats.setdefault("last_swap_error", None)
        self._backoff = Backoff(retry_s, retry_max_s)
        self._clock = clock
        self.wanted: dict[str, Any] | None = None  # the newest announced version not serving
        self._refused: set[int] = set()
        self._next_attempt = 0.0

    def offer(self, event: dict[str, Any]) -> None:
        """A ``policy_version`` record as read from the topic (any policy, any order)."""
        if event["policy_name"] != self.policy_name:
            return
        version = event["policy_version"]
        if version <= (self._serving_version() or 0) or version in self._refused:
            return
        if self.wanted is not None and version <= self.wanted["policy_version"]:
            return
        self.wanted = event
        self._next_attempt = self._clock()  # a newer version is tried at once
        self._backoff.reset()

    def tick(self) -> None:
        """Try the wanted version if its time has come. Never raises."""
        if self.wanted is None or self._clock() < self._next_attempt:
            return
        event, version = self.wanted, self.wanted["policy_version"]
        try:
            self._check_base_model(event)
            self._install(self._fetch(event), version)
        except WeightsRejected as exc:
            self._refused.add(version)
            self.wanted = None
            self.stats["versions_refused"] += 1
            log.error(
                "refused %s v%d, still serving v%s: %s",
                self.policy_name,
                version,
                self._serving_version(),
                exc,
            )
        except Exception as exc:  # noqa: BLE001 - transient until proven otherwise: retried
            delay = self._backoff.next()
            self._next_attempt = self._clock() + delay
            self.stats["swap_failures"] += 1
            self.stats["last_swap_error"] = f"v{version}: {type(exc).__name__}: {exc}"[:500]
            log.error(
                "could not swap in %s v%d (failure %d), still serving v%s; trying again in %g s",
                self.policy_name,
                version,
                self.stats["swap_failures"],
                self._serving_version(),
                delay,
                exc_info=exc,
            )
        else:
            self.wanted = None
            self._backoff.reset()
            log.info("now serving %s v%d", self.policy_name, version)

    def _check_base_model(self, event: dict[str, Any]) -> None:
        announced = event.get("base_model")
        if self.base_model is None or announced is None:
            return
        if not same_base_model(announced, self.base_model):
            raise WeightsRejected(
                f"it was trained from base model {announced!r}, and this worker serves "
                f"{self.base_model!r}: serve it with a worker started on that base model "
                "(--model, or --base-model when the same model has another name here)"
            )

    def follow(
        self,
        stop: threading.Event,
        open_reader: Callable[[], VersionReader],
        decode: Callable[[bytes], dict[str, Any]],
        poll_s: float = 0.5,
    ) -> None:
        """Read the versions topic (through readers ``open_reader`` makes) until ``stop``."""
        reader: VersionReader | None = None
        reader_backoff = Backoff(self._backoff.first_s, self._backoff.max_s)
        try:
            while not stop.is_set():
                try:
                    if reader is None:
                        reader = open_reader()
                    self._read_one(reader, decode, poll_s)
                    reader_backoff.reset()
                except Exception:  # noqa: BLE001 - the follower outlives every error
                    delay = reader_backoff.next()
                    log.exception("reading policy versions failed; reading again in %g s", delay)
                    _close(reader)
                    reader = None
                    stop.wait(delay)
                self.tick()
        finally:
            _close(reader)

    def _read_one(
        self, reader: VersionReader, decode: Callable[[bytes], dict[str, Any]], poll_s: float
    ) -> None:
        message = reader.poll(poll_s)
        if message is None:
            return
        if message.error():
            log.warning("policy versions reader: %s (continuing)", message.error())
            return
        try:
            event = decode(message.value())
        except EventDecodeError as exc:
            log.warning("unreadable policy version record: %s", exc)
            return
        self.offer(event)


class PinnedUnavailable(RuntimeError):
    """A pinned version that this worker cannot serve (the message names it and says why)."""


class PinnedVersions:
    """Backends of pinned policy versions (evaluation of a frozen version), built on demand and
    kept for the ``capacity`` most recently used.

    Guarantees: :meth:`backend` returns a backend built from exactly version N's weights, fetched
    and verified like a followed version (its announcement on the versions topic, the manifest's
    sha256, every file's) and trained from the worker's base model; version 0 is the base model.
    A version that this worker has not seen announced within ``announce_wait_s`` (its versions
    reader is still reading the topic, or the version was compacted away or never published), that
    was trained from another base model, or whose weights cannot be fetched or built raises
    :class:`PinnedUnavailable` naming it: it is never served by another version. A failure is not
    remembered: the next request for the version tries again. Thread-safe; one build at a time.
    """

    KEEP_ANNOUNCED = 256  # newest announcements kept (a pinned version is a recent one)

    def __init__(
        self,
        policy_name: str,
        base_model: str | None,
        fetch: Callable[[dict[str, Any]], Path],
        build: Callable[[Path | None], Any],
        capacity: int = 2,
        announce_wait_s: float = 30.0,
    ):
        if capacity < 1:
            raise ValueError(f"keep at least one pinned backend, not {capacity}")
        self.policy_name, self.base_model = policy_name, base_model
        self._fetch, self._build, self.capacity = fetch, build, capacity
        self._announced: dict[int, dict[str, Any]] = {}
        self._backends: OrderedDict[int, Any] = OrderedDict()
        self._lock = threading.Lock()
        self._news = threading.Condition(self._lock)  # an announcement was read
        self.announce_wait_s = announce_wait_s

    def announced(self, event: dict[str, Any]) -> None:
        """A ``policy_version`` record as read from the topic (any policy, any order)."""
        if event["policy_name"] != self.policy_name:
            return
        with self._lock:
            self._announced[event["policy_version"]] = event
            for old in sorted(self._announced)[: -self.KEEP_ANNOUNCED]:
                del self._announced[old]
            self._news.notify_all()

    def backend(self, version: int) -> Any:
        with self._lock:
            if version in self._backends:
                self._backends.move_to_end(version)
                return self._backends[version]
            backend = self._load(version)
            self._backends[version] = backend
            while len(self._backends) > self.capacity:
                self._backends.popitem(last=False)
            return backend

    def cached(self) -> list[int]:
        with self._lock:
            return list(self._backends)

    def _load(self, version: int) -> Any:
        name = f"{self.policy_name} v{version}"
        if version == 0:
            weights = None
        else:
            # A worker that just started may not have read the versions topic that far yet,
            # and a version may be pinned the moment it is announced: wait a little for it.
            self._news.wait_for(lambda: version in self._announced, self.announce_wait_s)
            event = self._announced.get(version)
            if event is None:
                raise PinnedUnavailable(
                    f"pinned {name} was never announced to this worker (not published, not yet "
                    "read, or compacted away)"
                )
            announced = event.get("base_model")
            if self.base_model and announced and not same_base_model(announced, self.base_model):
                raise PinnedUnavailable(
                    f"pinned {name} was trained from {announced!r}, this worker serves "
                    f"{self.base_model!r}"
                )
            try:
                weights = self._fetch(event)
            except Exception as exc:  # noqa: BLE001 - answered as an error naming the version
                raise PinnedUnavailable(f"pinned {name}: {type(exc).__name__}: {exc}") from exc
        try:
            return self._build(weights)
        except Exception as exc:  # noqa: BLE001 - answered as an error naming the version
            raise PinnedUnavailable(
                f"pinned {name} could not be built: {type(exc).__name__}: {exc}"
            ) from exc


class SwapBusy(RuntimeError):
    """Backend calls did not finish in time for a swap (a swap failure: it is tried again)."""


class ServingGate:
    """Backend calls and swaps exclude each other: any number of calls run at once, and a swap
    waits until none runs, holding new ones back meanwhile, so that an engine is never replaced
    under a running call and a call never starts on a backend about to be replaced.

    A call holds one *token* from :meth:`enter` to :meth:`leave`; :meth:`also` adds a token for
    work that outlives the caller's (a backend call on its own thread) and never waits, since its
    caller already holds one.
    """

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._tokens = 0
        self._swapping = False

    def enter(self) -> None:
        with self._changed:
            self._changed.wait_for(lambda: not self._swapping)
            self._tokens += 1

    def also(self) -> None:
        with self._changed:
            self._tokens += 1

    def leave(self) -> None:
        with self._changed:
            self._tokens -= 1
            self._changed.notify_all()

    @contextlib.contextmanager
    def swap(self, timeout_s: float) -> Iterator[None]:
        """Hold calls back and wait up to ``timeout_s`` for running ones to finish
        (:class:`SwapBusy` past it); the body runs with no call running. Swaps run one at a
        time: one that finds another under way waits for it first (within the same
        ``timeout_s``), as a followed version's swap and a pinned version's build may meet."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            if not self._changed.wait_for(lambda: not self._swapping, timeout_s):
                raise SwapBusy(f"another swap still under way after {timeout_s:g} s")
            self._swapping = True
            try:
                left = max(0.0, deadline - time.monotonic())
                if not self._changed.wait_for(lambda: self._tokens == 0, left):
                    raise SwapBusy(
                        f"{self._tokens} backend calls still running after {timeout_s:g} s"
                    )
            except BaseException:
                self._swapping = False
                self._changed.notify_all()
                raise
        try:
            yield
        finally:
            with self._changed:
                self._swapping = False
                self._changed.notify_all()


def _close(reader: VersionReader | None) -> None:
    if reader is None:
        return
    try:
        reader.close()
    except Exception:  # noqa: BLE001 - a reader that cannot close is dropped all the same
        log.warning("closing the policy versions reader failed", exc_info=True)
