"""Who holds a local TCP port: for the one-line error when a port a command wants is taken."""

from __future__ import annotations

import psutil


def port_holder(port: int) -> str | None:
    """``"pid 1234 (python: webgym sites serve)"`` for the process listening on ``port``, or None
    when nothing listens there or the holder cannot be seen (another user's process)."""
    try:
        connections = psutil.net_connections(kind="tcp")
    except (psutil.AccessDenied, OSError):
        return None
    for connection in connections:
        if (
            connection.status == psutil.CONN_LISTEN
            and connection.laddr
            and connection.laddr.port == port
        ):
            if connection.pid is None:
                return "another user's process"
            try:
                process = psutil.Process(connection.pid)
                command = " ".join(process.cmdline()[:4]) or process.name()
            except psutil.Error:
                return f"pid {connection.pid}"
            return f"pid {connection.pid} ({command})"
    return None
