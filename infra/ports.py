"""Local TCP ports: who holds one (for the one-line error when a port a command wants is taken),
and a throwaway HTTP server on a free loopback port."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import psutil


@contextmanager
def loopback_server(handler: type[BaseHTTPRequestHandler], path: str = "/") -> Iterator[str]:
    """Serve ``handler`` on a free port of 127.0.0.1 from a daemon thread; yields the URL of
    ``path``. The server is shut down and its socket closed when the block ends."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}{path}"
    finally:
        server.shutdown()
        server.server_close()


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
