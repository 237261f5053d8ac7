"""Scalars to TensorBoard event files (``--tensorboard DIR``), as users of PyTorch expect.

A thin wrapper over ``torch.utils.tensorboard.SummaryWriter``: nothing is imported or written
unless a directory is given, so a worker without ``--tensorboard`` pays nothing. Guarantees: every
scalar is flushed to ``DIR`` by :meth:`ScalarLog.flush` or :meth:`ScalarLog.close`; view with
``tensorboard --logdir DIR``.
"""

from __future__ import annotations

from pathlib import Path


class ScalarLog:
    def __init__(self, directory: Path | str | None):
        self._writer = None
        if directory:
            from torch.utils.tensorboard import SummaryWriter  # torch: only when logging is asked

            Path(directory).mkdir(parents=True, exist_ok=True)
            self._writer = SummaryWriter(log_dir=str(directory))

    def scalar(self, tag: str, value: float, step: int, wall_time: float | None = None) -> None:
        if self._writer is not None:
            self._writer.add_scalar(tag, value, global_step=step, walltime=wall_time)

    def flush(self) -> None:
        if self._writer is not None:
            self._writer.flush()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
