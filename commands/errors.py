"""Errors are sorted here, at the edge, once for every command.

``user_errors`` turns each known failure into one red line (what went wrong and what to do next)
and exit code 1; anything else is a bug and crashes loudly with its traceback.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache, wraps
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape

console = Console()
errors = Console(stderr=True)


@cache
def known_errors() -> tuple[type[Exception], ...]:
    """The failures a user can mend, each said in one line. Imported when a command fails, not
    when it starts: they come from most layers, and every worker process would pay for them."""
    from analytics.errors import AnalyticsError
    from commands.children import RunFailed
    from commands.eval_run import EvalFailed
    from infra import stack
    from infra.chromium import ChromiumMissing
    from infra.cpu_group import CpuGroupUnavailable
    from infra.log_reader import LogStalled
    from infra.minio_store import ObjectStoreError
    from infra.producer import DeliveryError
    from infra.settings import SettingsError
    from infra.topic_admin import BrokerUnreachable, TopicMissing
    from infra.weights import WeightsRejected
    from tasks.sets import TaskSetError
    from tasks.split import SplitError
    from tasks.webgym_format import TaskFileError

    return (
        stack.StackError,
        BrokerUnreachable,
        SettingsError,
        ChromiumMissing,
        CpuGroupUnavailable,
        DeliveryError,
        TopicMissing,
        LogStalled,
        RunFailed,
        WeightsRejected,
        AnalyticsError,
        TaskSetError,
        TaskFileError,
        SplitError,
        EvalFailed,
        ObjectStoreError,
    )


def user_errors(command: Callable[..., Any]) -> Callable[..., Any]:
    """Turn the known failures into a red message and exit code 1."""

    @wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except Exception as exc:
            if not isinstance(exc, known_errors()):
                raise
            errors.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
            raise typer.Exit(1) from None

    return wrapper
