"""One call of a policy backend: ``generate`` on its own daemon thread, so its caller can stop
waiting at a timeout (the call is then cancelled, if the backend can be, and its reply dropped).

Also the protocol every backend follows and the factory the worker builds versions with.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from agents.policy.backends import ChatRequest, Generation


class Backend(Protocol):
    """``generate`` answers every request, in order. A backend whose class sets
    ``cancellable = True`` takes ``generate(requests, cancelled=event)`` and returns soon after
    the event is set (its replies are then dropped). One whose class sets ``uses_weights =
    False`` serves no policy version (a backend that does not say serves the weights it was
    built with)."""

    def generate(self, requests: list[ChatRequest]) -> list[Generation]: ...


def uses_weights(backend: Backend) -> bool:
    return getattr(backend, "uses_weights", True)


BackendFactory = Callable[[Path | None], Backend]  # weights dir of a version, None = the base


class InferTimeout(Exception):
    """A backend call gave no answer within the worker's inference timeout."""

    def __init__(self, timeout_s: float):
        super().__init__(f"no answer within {timeout_s:g} s")


class BackendCall:
    """One ``backend.generate`` on its own daemon thread, so that its caller can stop waiting.

    :meth:`result` waits up to a timeout; past it, the call is cancelled (for a cancellable
    backend) and whatever it returns later is never read. ``on_return`` runs on the call's
    thread once the backend has returned or raised.
    """

    def __init__(
        self,
        backend: Backend,
        requests: list[ChatRequest],
        on_return: Callable[[BackendCall], None] = lambda call: None,
    ):
        self.cancelled = threading.Event()
        self.returned = threading.Event()
        self._generations: list[Generation] = []
        self._error: BaseException | None = None
        self._on_return = on_return
        self._thread = threading.Thread(
            target=self._call, args=(backend, requests), name="backend-call", daemon=True
        )
        self._thread.start()

    def _call(self, backend: Backend, requests: list[ChatRequest]) -> None:
        try:
            if getattr(backend, "cancellable", False):
                self._generations = backend.generate(requests, cancelled=self.cancelled)
            else:
                self._generations = backend.generate(requests)
        except BaseException as exc:  # noqa: BLE001 - raised to the caller by result()
            self._error = exc
        finally:
            self.returned.set()
            self._on_return(self)

    def result(self, timeout_s: float) -> list[Generation]:
        """The generations, or the backend's error; :class:`InferTimeout` past ``timeout_s``."""
        if not self.returned.wait(timeout_s):
            self.cancelled.set()
            raise InferTimeout(timeout_s)
        if self._error is not None:
            raise self._error
        return self._generations
