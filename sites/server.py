"""One HTTP server for every site of the practice web, dispatching on the ``Host`` header.

Browsers reach it through Chromium's ``--host-resolver-rules`` (:attr:`PracticeWebServer
.host_resolver_rules` maps ``*.webgym.test`` to our port), so pages see plain
``http://<site_id>.webgym.test/`` URLs. The server keeps no state between requests (carts live in
cookies), answers from a thread per connection, and :meth:`PracticeWebServer.stop` returns
within about a second even while ``/__webgym/hang`` requests are waiting.

Test-support paths, on every host: ``/__webgym/hang`` (answers only when the server stops, or
after 300 s), ``/__webgym/slow?ms=N`` (answers after N ms, at most 120 000),
``/__webgym/download`` (an attachment), ``/__webgym/popup`` (a new-tab link and dialogs) and
``/__webgym/captcha`` (a bot wall, as real sites show crawlers: blocked-site detection).
"""

from __future__ import annotations

import logging
import mimetypes
import socket
import threading
from collections.abc import Iterable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlsplit

from sites.data import TLD, Site
from sites.layout import esc
from sites.routes import Request, Response, SiteApp

log = logging.getLogger(__name__)

HANG_LIMIT_S = 300
SLOW_LIMIT_MS = 120_000
MAX_BODY = 64 * 1024

_POPUP = """<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>Pop-ups | WebGym
test page</title></head><body style="font-family:'DejaVu Sans',sans-serif;padding:32px">
<h1>Pop-ups and dialogs</h1>
<p><a id="new-tab" href="/__webgym/slow?ms=0" target="_blank">Open a page in a new tab</a></p>
<p><button id="alert" onclick="alert('Hello from an alert')">Show an alert</button>
<button id="confirm" onclick="document.getElementById('answer').textContent =
confirm('Do you confirm?') ? 'confirmed' : 'cancelled'">Ask to confirm</button></p>
<p>Answer: <span id="answer">none yet</span></p></body></html>"""


def _page(title: str, body: str) -> bytes:
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>'
        f"</head><body style=\"font-family:'DejaVu Sans',sans-serif;padding:32px\">{body}"
        "</body></html>"
    ).encode()


def _cookies(header: str) -> dict[str, str]:
    # Lenient on purpose: http.cookies rejects a whole header for one odd cookie.
    cookies = {}
    for part in header.split(";"):
        name, sep, value = part.strip().partition("=")
        if sep and name:
            cookies[name] = value.strip('"')
    return cookies


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # stop() must not wait for hung or idle keep-alive connections

    def __init__(self, address: tuple[str, int], web: PracticeWebServer):
        self.web = web
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        super().__init__(address, _Handler)

    def process_request_thread(self, request: socket.socket, client_address: object) -> None:
        with self.connections_lock:
            self.connections.add(request)
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self.connections_lock:
                self.connections.discard(request)

    def close_connections(self) -> None:
        """Wake every handler blocked on a keep-alive read: the peer then looks closed."""
        with self.connections_lock:
            for connection in list(self.connections):
                try:
                    connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass  # already closed by the peer

    def handle_error(self, request: socket.socket, client_address: object) -> None:
        log.exception("error while serving %s", client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: one connection serves a browser's many requests
    server_version = "webgym-practice-web/1"
    timeout = 60  # an idle keep-alive connection frees its thread after a minute
    server: _HTTPServer

    def setup(self) -> None:
        super().setup()
        # Headers and body leave in two writes; without this, Nagle's algorithm and the peer's
        # delayed ACK add 40 ms to every keep-alive response.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_GET(self) -> None:
        self._serve("GET")

    def do_HEAD(self) -> None:
        self._serve("HEAD")

    def do_POST(self) -> None:
        self._serve("POST")

    def log_message(self, format: str, *args: object) -> None:
        log.debug("%s %s", self.address_string(), format % args)

    def _read_form(self) -> dict[str, str] | None:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            return None
        if not 0 <= length <= MAX_BODY:
            return None
        body = self.rfile.read(length).decode("utf-8", "replace")
        return dict(parse_qsl(body, keep_blank_values=True, max_num_fields=200))

    def _serve(self, method: str) -> None:
        web = self.server.web
        split = urlsplit(self.path)
        form: dict[str, str] = {}
        if method == "POST":
            parsed = self._read_form()
            if parsed is None:
                self.close_connection = True
                return self._send(Response(413, _page("Request too large", "<h1>Too large</h1>")))
            form = parsed
        query = dict(parse_qsl(split.query, keep_blank_values=True, max_num_fields=200))
        path = split.path or "/"
        if path.startswith("/__webgym/"):
            return self._send(web.support(path, query), head=method == "HEAD")
        if path == "/favicon.ico":
            return self._send(Response(204, b"", content_type="image/x-icon"))
        static = web.static_file(self.headers.get("Host", ""), path)
        if static is not None:
            return self._send(static, head=method == "HEAD")
        app = web.app_for(self.headers.get("Host", ""))
        if app is None:
            return self._send(web.unknown_host(self.headers.get("Host", "")), head=method == "HEAD")
        request = Request(
            "GET" if method == "HEAD" else method,
            path,
            query,
            form,
            _cookies(self.headers.get("Cookie", "")),
        )
        try:
            response = app.handle(request)
        except Exception:  # a bug in a page: answer 500 and log it, keep serving the others
            log.exception("error rendering %s%s", app.site.hostname, self.path)
            response = Response(500, _page("Server error", "<h1>Something went wrong</h1>"))
        self._send(response, head=method == "HEAD")

    def _send(self, response: Response, head: bool = False) -> None:
        self.send_response(response.status)
        self.send_header("Content-Type", response.content_type)
        self.send_header("Content-Length", str(len(response.body)))
        self.send_header("Cache-Control", "no-store")
        for name, value in response.headers:
            self.send_header(name, value)
        if self.server.web.stopping.is_set():
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        if not head:
            self.wfile.write(response.body)

    def handle_one_request(self) -> None:
        try:
            super().handle_one_request()
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            self.close_connection = True  # the browser went away; nothing to answer


def _hostname(host_header: str) -> str:
    hostname = host_header.strip().lower().rstrip(".")
    hostname = hostname.rsplit(":", 1)[0] if ":" in hostname else hostname
    return hostname.rstrip(".")


class PracticeWebServer:
    """Serves ``sites`` on one port; a context manager that starts and stops it.

    The socket is bound when the object is built, so :attr:`port` is known before :meth:`start`.
    """

    def __init__(
        self,
        sites: Iterable[Site],
        host: str = "127.0.0.1",
        port: int = 0,
        static_hosts: Mapping[str, Path] | None = None,
    ):
        self.sites = list(sites)
        # Hosts served as plain files from a directory (the MiniWoB++ pages), nothing rendered.
        self.static_hosts = {h.lower(): Path(d).resolve() for h, d in (static_hosts or {}).items()}
        self._apps = {site.hostname: SiteApp(site) for site in self.sites}
        if len(self._apps) != len(self.sites):
            raise ValueError("two sites share a hostname; generate them with one generate_sites")
        self.host = host
        self.stopping = threading.Event()
        self._httpd = _HTTPServer((host, port), self)
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    def base_url(self, site: Site) -> str:
        """The site's home page as a browser started with :attr:`host_resolver_rules` sees it."""
        return f"http://{site.hostname}/"

    @property
    def host_resolver_rules(self) -> str:
        """The value of Chromium's ``--host-resolver-rules`` that routes every site here."""
        target = "127.0.0.1" if self.host in ("", "0.0.0.0") else self.host
        return f"MAP *.{TLD} {target}:{self.port}"

    def app_for(self, host_header: str) -> SiteApp | None:
        return self._apps.get(_hostname(host_header))

    def static_file(self, host_header: str, path: str) -> Response | None:
        """The file ``path`` of a static host, a 404 inside it, or None for other hosts."""
        root = self.static_hosts.get(_hostname(host_header))
        if root is None:
            return None
        target = (root / unquote(path).lstrip("/")).resolve()
        if not target.is_relative_to(root) or not target.is_file():
            return Response(404, _page("Not found", "<h1>No such file</h1>"))
        content_type = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
        if content_type.startswith("text/") or content_type.endswith("javascript"):
            content_type += "; charset=utf-8"
        return Response(200, target.read_bytes(), content_type)

    def start(self) -> PracticeWebServer:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._httpd.serve_forever,
                kwargs={"poll_interval": 0.1},
                name=f"practice-web:{self.port}",
                daemon=True,
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, release hung test requests and close idle connections. Idempotent."""
        self.stopping.set()
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._httpd.server_close()
        self._httpd.close_connections()

    def __enter__(self) -> PracticeWebServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def unknown_host(self, host: str) -> Response:
        links = "".join(
            f'<li><a href="{esc(self.base_url(site))}">{esc(site.hostname)}</a> '
            f"({esc(site.domain)}: {esc(site.name)})</li>"
            for site in self.sites
        )
        body = (
            f"<h1>Unknown site</h1><p>No practice site is called {esc(host or '(no Host header)')}."
            f" This server has {len(self.sites)} sites:</p><ul>{links}</ul>"
        )
        return Response(404, _page("Unknown site | WebGym practice web", body))

    def support(self, path: str, query: dict[str, str]) -> Response:
        """The test-support pages under ``/__webgym/``."""
        if path == "/__webgym/hang":
            self.stopping.wait(HANG_LIMIT_S)
            return Response(503, _page("Hung page", "<h1>This page hung until now</h1>"))
        if path == "/__webgym/slow":
            raw = query.get("ms", "0")
            ms = min(int(raw), SLOW_LIMIT_MS) if raw.isdigit() else 0
            self.stopping.wait(ms / 1000)
            return Response(
                200, _page("Slow page", f"<h1>Slow page</h1><p>Answered after {ms} ms.</p>")
            )
        if path == "/__webgym/download":
            body = b"site,items\n" + b"".join(
                f"{site.site_id},{len(site.items)}\n".encode() for site in self.sites
            )
            disposition = 'attachment; filename="webgym-sites.csv"'
            return Response(200, body, "text/csv", (("Content-Disposition", disposition),))
        if path == "/__webgym/popup":
            return Response(200, _POPUP.encode())
        if path == "/__webgym/captcha":
            body = (
                "<h1>Verify you are human</h1><p>We have detected unusual traffic from your "
                "network. Complete the CAPTCHA to continue.</p><p><label><input type=checkbox> "
                "I am not a robot</label></p>"
            )
            return Response(403, _page("Verify you are human", body))
        return Response(404, _page("Not found", "<h1>No such test page</h1>"))
