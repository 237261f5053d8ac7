"""Security: what an agent may open, where the MinIO credentials go, what the loop listens on.

- Navigation outside the task's hosts, to ``file://`` and to private addresses (loopback,
  RFC 1918, link-local metadata, IPv6 loopback, unspecified, a decimal IP, an IPv4-mapped IPv6
  address, a host name that resolves to loopback) is refused. One run of the whole loop (16
  episodes in flight, the scripted policy) starts its episodes at such URLs; a focused run of one
  browser worker steers an episode to them by navigation, links, scripts, redirects and
  sub-resources. A "secret" server on loopback records every request it gets: it must get none,
  and its page title must never reach an observation.
- The MinIO access and secret key never appear in any record of the run's topics (raw bytes:
  key, value, headers), in any log file under the state dir's logs, in the command lines of the
  run's processes, or in the ``--help`` of any ``webgym`` command.
- Every socket the local stack and the loop listen on is bound to loopback; so are the servers a
  user starts by hand with their defaults (dashboard, practice web, metrics, Faust's web).
"""

from __future__ import annotations

import contextlib
import http.server
import io
import ipaddress
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
import typer.main
from PIL import Image
from typer.testing import CliRunner

from bench.fleet import WorkerProcess, worker_env
from commands.children import Child, faust_argv, settings_env
from commands.main import app
from infra.consumer import EventConsumer, build_consumer
from infra.dead_letters import DeadLetterRouter
from infra.log_reader import read_topic
from infra.processes import command_line as proc_command_line
from infra.processes import descendants
from infra.producer import EventProducer
from infra.settings import Settings
from infra.stack.process import ManagedProcess
from infra.topic_admin import prefix_topics
from sites import generate_sites
from sites.tasks import generate_tasks
from streams.row_codec import plain
from tests.chaos.conftest import (
    Fault,
    assert_nothing_lost,
    chaos_options,
    chaos_run,
    command_tree,
    partition_watermarks,
)
from tests.e2e.conftest import isolated_settings
from tests.integration.browser_fleet import Episodes

IN_FLIGHT = 16
EPISODES = 32
SITES = 10
SEED = 11
TOKEN = f"webgym-secret-{uuid.uuid4().hex[:12]}"  # the title and body of every "secret" page
REFUSED_PRIVATE = "private, loopback or link-local"


# -- a server that must never be reached ------------------------------------------------------


class _QuietPages(http.server.BaseHTTPRequestHandler):
    """A handler that sends HTML pages and logs nothing."""

    def send_page(self, body: bytes) -> None:
        """200 OK with ``body`` as text/html."""
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


class _Recorder(_QuietPages):
    """Answers every GET with the secret page and records it; the test asserts it never does."""

    def do_GET(self) -> None:  # noqa: N802 - the http.server API
        self.server.hits.append(f"{self.headers.get('Host')}{self.path}")
        self.send_page(f"<title>{TOKEN}</title><h1>{TOKEN}</h1>".encode())

    do_POST = do_GET  # noqa: N815


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, host: str, handler: type, family: int = socket.AF_INET):
        self.address_family = family
        self.hits: list[str] = []
        super().__init__((host, 0), handler)
        self.port = self.server_address[1]
        threading.Thread(target=self.serve_forever, daemon=True).start()


@dataclass
class SecretServers:
    """The same secret page on 127.0.0.1 and on [::1]."""

    v4: _Server
    v6: _Server

    @property
    def hits(self) -> list[str]:
        return self.v4.hits + self.v6.hits


@contextlib.contextmanager
def secret_servers() -> Iterator[SecretServers]:
    servers = SecretServers(
        _Server("127.0.0.1", _Recorder), _Server("::1", _Recorder, socket.AF_INET6)
    )
    try:
        yield servers
    finally:
        for server in (servers.v4, servers.v6):
            server.shutdown()
            server.server_close()


def loopback_name() -> str | None:
    """A host name (not ``localhost``, which the policy refuses by name) that resolves to a
    loopback address here: the machine's own name usually does (/etc/hosts)."""
    for name in (socket.gethostname(), "localhost.localdomain"):
        if not name or name.endswith("localhost"):
            continue
        try:
            found = {info[4][0] for info in socket.getaddrinfo(name, None)}
        except OSError:
            continue
        if found and all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in found):
            return name
    return None


@dataclass(frozen=True)
class Case:
    """A refused start URL: the task's website (its one allowed host) and why it is refused."""

    name: str
    url: str
    website: str | None  # None: the task's own practice-web site (the URL is off its host)
    refusal: str


def refused_cases(secret: SecretServers, other_site: str) -> list[Case]:
    s4, s6 = secret.v4.port, secret.v6.port
    cases = [
        Case("file", "file:///etc/passwd", None, "scheme 'file' is not allowed"),
        Case("other host", f"http://{other_site}/", None, "is not allowed for this task"),
        Case("loopback, not allowed", f"http://127.0.0.1:{s4}/a", None, "is not allowed"),
        Case("loopback", f"http://127.0.0.1:{s4}/b", "127.0.0.1", REFUSED_PRIVATE),
        Case("IPv6 loopback", f"http://[::1]:{s6}/c", "::1", REFUSED_PRIVATE),
        Case(
            "IPv4-mapped IPv6",
            f"http://[::ffff:127.0.0.1]:{s4}/d",
            "::ffff:127.0.0.1",
            REFUSED_PRIVATE,
        ),
        Case(
            "cloud metadata",
            "http://169.254.169.254/latest/meta-data/",
            "169.254.169.254",
            REFUSED_PRIVATE,
        ),
        Case("RFC 1918", "http://10.1.2.3/", "10.1.2.3", REFUSED_PRIVATE),
        Case("localhost", f"http://localhost:{s4}/e", "localhost", REFUSED_PRIVATE),
        Case("unspecified", f"http://0.0.0.0:{s4}/f", "0.0.0.0", REFUSED_PRIVATE),
        Case("decimal IP", f"http://2130706433:{s4}/g", "2130706433", REFUSED_PRIVATE),
    ]
    name = loopback_name()
    if name is not None:
        cases.append(
            Case("name resolving to loopback", f"http://{name}:{s4}/h", name, "resolves to")
        )
    return cases


# -- sockets and processes ------------------------------------------------------------------


def _address(hex_address: str) -> str:
    raw = bytes.fromhex(hex_address)
    if len(raw) == 4:
        return str(ipaddress.IPv4Address(raw[::-1]))
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
    return str(ipaddress.IPv6Address(words))


def listening(pid: int) -> list[tuple[str, int]]:
    """(address, port) of every TCP socket ``pid`` listens on, from /proc."""
    inodes = set()
    with contextlib.suppress(OSError):
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                link = os.readlink(fd)
                if link.startswith("socket:["):
                    inodes.add(link[8:-1])
    found = []
    for table in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[3] == "0A" and fields[9] in inodes:
                address, port = fields[1].rsplit(":", 1)
                found.append((_address(address), int(port, 16)))
    return found


def is_loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def command_line(pid: int) -> bytes:
    return "\0".join(proc_command_line(pid)).encode()


def process_name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"


# -- the loop with refused start URLs (shared by the tests below) -----------------------------


@dataclass
class SecurityRun:
    settings: Settings
    run_id: str
    cases: list[Case]
    case_of_task: dict[str, Case]
    control_tasks: set[str]
    result: object  # ChaosResult
    secret_hits: list[str]
    sockets: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    command_lines: dict[str, bytes] = field(default_factory=dict)


@pytest.fixture(scope="module")
def security_run(stack_settings: Settings, request) -> Iterator[SecurityRun]:
    sites = generate_sites(seed=SEED, count=SITES)
    easy = [t for t in generate_tasks(sites, seed=SEED) if t["difficulty"] == "easy"]
    with isolated_settings(stack_settings) as settings, secret_servers() as secret:
        cases = refused_cases(secret, other_site=sites[-1].hostname)
        tasks, case_of_task = [], {}
        for case, task in zip(cases, easy, strict=False):
            task = {**task, "start_url": case.url}
            if case.website is not None:
                task["website"] = case.website
            case_of_task[task["task_id"]] = case
            tasks.append(task)
        controls = easy[len(cases) : len(cases) + 2]  # unchanged tasks: the loop still works
        tasks += controls
        assert len(case_of_task) == len(cases)
        # One difficulty only: the sampler spreads attempts evenly over these tasks.
        options = chaos_options(
            "sec", episodes=EPISODES, in_flight=IN_FLIGHT, error_rate=0.0, sites=SITES, seed=SEED,
            tasks=tuple(tasks),
        )  # fmt: skip
        run = SecurityRun(settings, options.run_id, cases, case_of_task, set(), None, [])
        run.control_tasks = {t["task_id"] for t in controls}

        def inspect(summary, children: dict[str, Child]) -> None:
            if run.sockets or summary.ended < 2 or summary.started - summary.ended < IN_FLIGHT // 2:
                return
            # Episodes served and in flight: every worker, Chromium and its driver are up.
            for name, child in children.items():
                for pid in descendants(child.process.pid):
                    label = f"{name}/{process_name(pid)}[{pid}]"
                    run.sockets[label] = listening(pid)
                    run.command_lines[label] = command_line(pid)
            run.sockets[f"test process (practice web)[{os.getpid()}]"] = listening(os.getpid())

        run.result = chaos_run(
            settings, options, Fault("refused start URLs (security)"), inspect, request
        )
        run.secret_hits = list(secret.hits)
        yield run


def _of_run(settings: Settings, suffix: str, run_id: str):
    return [
        e
        for e in read_topic(settings, suffix)
        if e.record.get("episode_id", "").startswith(f"{run_id}-")
    ]


def _blank(screenshot: bytes) -> bool:
    low, high = Image.open(io.BytesIO(screenshot)).convert("L").getextrema()
    return high - low <= 8  # JPEG noise on a uniform page


def test_refused_start_urls_never_reach_a_page(security_run):
    run = security_run
    assert_nothing_lost(run.result, EPISODES)
    assert run.secret_hits == [], f"the loopback secret server was reached: {run.secret_hits}"

    task_of = {
        e.record["episode_id"]: e.record["task_id"]
        for e in _of_run(run.settings, "episodes", run.run_id)
        if e.record["kind"] == "started"
    }
    observations = _of_run(run.settings, "observations", run.run_id)
    seen_cases = set()
    for event in observations:
        record = event.record
        parts = urlsplit(record["url"])
        assert TOKEN not in record["title"], record["url"]
        assert parts.scheme in ("", "http", "https", "about"), record["url"]
        if parts.scheme in ("http", "https"):
            # Every page any episode showed is a practice-web page, never a refused target.
            assert parts.hostname.endswith(".webgym.test"), (record["episode_id"], record["url"])
        case = run.case_of_task.get(task_of[record["episode_id"]])
        if case is None:
            continue
        target = urlsplit(case.url).hostname
        assert target is None or parts.hostname != target, (case, record["url"])  # any step
        if record["step"] != 0 or record["failure"]:
            continue
        seen_cases.add(case.name)
        # The refused start: an error the agent sees, on a blank page with nothing of the target.
        assert record["url"] == "about:blank", (case, record["url"])
        assert record["action_error"] and case.refusal in record["action_error"], (
            case,
            record["action_error"],
        )
        assert record["title"] == "" and _blank(record["screenshot"]), case
    assert seen_cases == {c.name for c in run.cases}, "every refused start URL was tried"

    # The loop went on: the refusals ended no episode by themselves, the control tasks succeed.
    scored = {
        e.record["episode_id"]: e.record
        for e in _of_run(run.settings, "trajectories.scored", run.run_id)
    }
    assert any(r["reward"] == 1.0 for r in scored.values() if r["task_id"] in run.control_tasks), (
        "control tasks"
    )
    for record in scored.values():
        case = run.case_of_task.get(record["task_id"])
        if case is not None and case.website is not None:
            assert record["reward"] == 0.0, record["episode_id"]  # nothing reachable to solve


def test_the_loop_listens_only_on_loopback(security_run):
    sockets = security_run.sockets
    assert sockets, "the run never reached 16 episodes in flight"
    chromium = [label for label in sockets if "chrom" in label.lower()]
    assert chromium, f"no Chromium process among {sorted(sockets)}"
    exposed = {
        label: [f"{a}:{p}" for a, p in found if not is_loopback(a)]
        for label, found in sockets.items()
    }
    assert not any(exposed.values()), {k: v for k, v in exposed.items() if v}


# -- credentials ----------------------------------------------------------------------------


def _credentials(settings: Settings) -> dict[str, bytes]:
    """The keys to look for, whatever they are (those of the server the run used). `webgym up`
    generates long random ones (``webgym-`` and 12 hex digits; 40 characters); a key shorter
    than 8 characters (an existing cluster's) could match random bytes of a screenshot and is
    not looked for; with neither key left the test is skipped."""
    access, secret = settings.minio_credentials()
    keys = {"MinIO access key": access, "MinIO secret key": secret}
    kept = {name: key.encode() for name, key in keys.items() if len(key) >= 8}
    if not kept:
        pytest.skip("both MinIO keys are too short to be told apart from random bytes")
    return kept


def _raw_records(settings: Settings) -> Iterator[tuple[str, bytes]]:
    """(topic, key + value + headers) of every record of every topic of the deployment's
    prefix: the topic table's and the Faust app's own (changelogs, repartitions)."""
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition

    topics = prefix_topics(settings)
    consumer = build_consumer(settings, f"sec-scan-{uuid.uuid4().hex[:8]}", "sec-scan")
    try:
        marks = partition_watermarks(consumer, topics)
        ends = {where: high for where, (low, high) in marks.items() if high > low}
        consumer.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t, p in ends])
        left = set(ends)
        while left:
            message = consumer.poll(30)
            assert message is not None, f"stopped delivering before the end of {sorted(left)}"
            if message.error() is not None:
                continue  # partition EOF and the like
            where = (message.topic(), message.partition())
            if message.offset() + 1 >= ends[where]:
                left.discard(where)
            headers = b"".join(k.encode() + (v or b"") for k, v in message.headers() or [])
            value = message.value() or b""
            if message.topic().endswith("-changelog"):  # table rows are stored compressed
                value = plain(value)
            yield message.topic(), (message.key() or b"") + value + headers
    finally:
        consumer.close()


def _help_texts() -> Iterator[tuple[str, str]]:
    root = typer.main.get_command(app)
    runner = CliRunner()

    for path, _ in command_tree(root):
        result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "200"})
        assert result.exit_code == 0, (path, result.output)
        yield " ".join(["webgym", *path]), result.output


def test_minio_credentials_never_appear_in_events_logs_or_help(security_run, monkeypatch):
    settings = security_run.settings
    keys = _credentials(settings)

    records, topics = 0, set()
    for topic, raw in _raw_records(settings):
        records, topics = records + 1, topics | {topic}
        for name, key in keys.items():
            assert key not in raw, f"the {name} is in a record of {topic}"
    # The whole run was scanned: every episode's events, and the Faust app's own topics.
    assert records > EPISODES * 10, records
    for suffix in ("episodes", "observations", "ops.infer", "inferences", "trajectories.scored"):
        assert settings.topic(suffix) in topics, (suffix, sorted(topics))
    assert any(t.startswith(f"{settings.topic_prefix}-") for t in topics), sorted(topics)

    logs = [p for p in settings.logs_dir.rglob("*") if p.is_file()]
    assert any(p.parent.name == security_run.run_id for p in logs)
    for path in logs:
        with path.open("rb") as handle:
            tail = b""
            while chunk := handle.read(1 << 22):
                window = tail + chunk
                for name, key in keys.items():
                    assert key not in window, f"the {name} is in {path}"
                tail = chunk[-64:]

    for label, line in security_run.command_lines.items():
        for name, key in keys.items():
            assert key not in line, f"the {name} is on the command line of {label}"

    # Help never shows a key, even with the keys set in the environment (as a user would).
    access, secret = settings.minio_credentials()
    monkeypatch.setenv("WEBGYM_MINIO_ACCESS_KEY", access)
    monkeypatch.setenv("WEBGYM_MINIO_SECRET_KEY", secret)
    helped = 0
    for command, text in _help_texts():
        helped += 1
        for name, key in keys.items():
            assert key.decode() not in text, f"`{command} --help` shows the {name}"
    assert helped >= 25
    status = CliRunner().invoke(app, ["status"], env={"COLUMNS": "200"})
    assert status.exit_code == 0, status.output
    for name, key in keys.items():
        assert key.decode() not in status.output, f"`webgym status` shows the {name}"


# -- sockets of the stack and of servers started by hand ----------------------------------------


def test_the_stack_listens_only_on_loopback(stack_settings):
    if os.environ.get("WEBGYM_TEST_EXISTING_STACK") == "1":
        pytest.skip("an existing cluster: its processes are not ours to inspect")
    for name in ("kafka", "minio"):
        running = ManagedProcess(name, stack_settings.state_dir, name).running()
        assert running is not None, f"{name} is not running (its pid file is gone)"
        found = listening(running.pid)
        assert found, f"{name} (pid {running.pid}) listens on nothing?"
        exposed = [f"{a}:{p}" for a, p in found if not is_loopback(a)]
        assert not exposed, f"{name} listens beyond loopback: {exposed}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def _started(argv: list[str], env: dict[str, str], cwd: Path, marker: str) -> Iterator[int]:
    log = cwd / f"{uuid.uuid4().hex[:6]}.log"
    with log.open("wb") as handle:
        process = subprocess.Popen(
            argv, env=env, cwd=cwd, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        deadline = time.monotonic() + 180
        while marker not in log.read_text(errors="replace"):
            assert process.poll() is None, f"{argv} exited:\n{log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"{argv}: no {marker!r}:\n{log.read_text()[-3000:]}"
            time.sleep(0.3)
        time.sleep(1.0)  # the marker can precede the last listener by a moment
        yield process.pid
    finally:
        os.killpg(process.pid, signal.SIGTERM)  # its own session: only what it started
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def test_servers_started_with_their_defaults_bind_loopback(run_settings, tmp_path):
    env = {**settings_env(run_settings), "COLUMNS": "200"}
    webgym = [sys.executable, "-m", "commands.main"]
    servers = {
        "webgym dashboard": ([*webgym, "dashboard", "--port", "0"], "dashboard of"),
        "webgym sites serve": (
            [*webgym, "sites", "serve", "--port", "0", "--count", "2"],
            "serving",
        ),
        "webgym stats --follow --metrics-port": (
            [*webgym, "stats", "--follow", "--metrics-port", str(_free_port())],
            "Prometheus metrics on",
        ),
        # Faust's status pages, as the README starts a worker (without --without-web).
        "faust worker (web on)": (
            [a for a in faust_argv() if a != "--without-web"] + ["--web-port", str(_free_port())],
            "Ready",
        ),
    }
    exposed = {}
    for name, (argv, marker) in servers.items():
        with _started(argv, env, tmp_path, marker) as pid:
            found = [s for p in descendants(pid) for s in listening(p)]
        assert found, f"{name} listens on nothing?"
        exposed[name] = [f"{a}:{p}" for a, p in found if not is_loopback(a)]
    assert not any(exposed.values()), exposed


# -- one browser worker, steered at refused targets -----------------------------------------


class _Steering(_QuietPages):
    """The task's own site (*.webgym.test): pages that lead the browser elsewhere.

    /go?to=U (302 to U), /js?to=U (script sets location), /img?src=U (an image),
    /frame?src=U (an iframe), /links?to=U (a link to click), /img-redirect?to=U (an image whose
    URL redirects to U).
    """

    def do_GET(self) -> None:  # noqa: N802
        parts = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        target = query.get("to") or query.get("src") or ""
        if parts.path == "/go":
            self.send_response(302)
            self.send_header("Location", target)
            self.end_headers()
            return
        pages = {
            "/js": f"<script>location.href = {target!r};</script><p>moving on</p>",
            "/img": f'<img src="{target}" width=50 height=50><p>an image</p>',
            "/img-redirect": f'<img src="/go?to={target}" width=50 height=50><p>an image</p>',
            "/frame": f'<iframe src="{target}" width=300 height=100></iframe>',
            "/links": (
                f'<a id="away" href="{target}" style="display:block;width:400px;height:200px;'
                'background:#08f">go there</a>'
            ),
        }
        self.send_page(f"<title>steering</title>{pages.get(parts.path, '<p>home</p>')}".encode())


def test_a_browser_worker_refuses_every_way_to_a_private_target(run_settings, tmp_path):
    producer = EventProducer.connect(run_settings, "sec-steer")
    results = EventConsumer(
        build_consumer(run_settings, f"sec-steer-{uuid.uuid4().hex[:8]}", "sec-steer"),
        DeadLetterRouter(run_settings, producer),
    )
    results.subscribe([run_settings.topic("observations"), run_settings.topic("episodes")])
    episodes = Episodes(run_settings, producer, results)
    site = _Server("127.0.0.1", _Steering)
    with secret_servers() as secret:
        s4 = secret.v4.port
        name = loopback_name()
        targets = [
            f"http://127.0.0.1:{s4}/1",
            f"http://[::1]:{secret.v6.port}/2",
            f"http://2130706433:{s4}/3",
            f"http://0.0.0.0:{s4}/4",
            f"http://localhost:{s4}/5",
            "http://169.254.169.254/latest/meta-data/",
            "file:///etc/passwd",
            *([f"http://{name}:{s4}/6"] if name else []),
        ]
        worker = WorkerProcess.start(
            worker_env(run_settings, site.port), tmp_path, f"sec-{uuid.uuid4().hex[:6]}"
        )
        try:
            home = "http://steer.webgym.test/"
            episode_id = f"sec-{uuid.uuid4().hex[:8]}"
            episodes.navigate(episode_id, home)
            assert episodes.observation(episode_id, 0)["url"] == home
            step = 0
            seen = []
            for target in targets:
                for how in ("navigate", "go", "js", "links", "img", "img-redirect", "frame"):
                    if how == "navigate":
                        action = {"kind": "navigate", "url": target}
                    else:
                        key = "src" if how in ("img", "frame") else "to"
                        action = {"kind": "navigate", "url": f"{home}{how}?{key}={target}"}
                    step += 1
                    episodes.act(episode_id, step, action)
                    observation = episodes.observation(episode_id, step)
                    if how == "links":  # click the link the page shows
                        step += 1
                        episodes.act(episode_id, step, {"kind": "left_click", "x": 100, "y": 50})
                        observation = episodes.observation(episode_id, step)
                    seen.append((how, target, observation["url"], observation["action_error"]))
                    assert TOKEN not in observation["title"], (how, target)
                    assert not secret.hits, (
                        f"{how} {target} reached the secret server: {secret.hits}"
                    )
                    parts = urlsplit(observation["url"])
                    shown = "" if parts.scheme in ("about", "chrome-error") else parts.hostname
                    assert shown in ("", "steer.webgym.test"), seen[-1]
                    error = observation["action_error"] or ""
                    if how == "navigate":
                        assert "refused" in error, seen[-1]
                    if how == "go":  # Chromium refuses a redirect to file:// itself
                        assert "refused" in error or "ERR_UNSAFE_REDIRECT" in error, seen[-1]
            assert episode_id not in episodes.failures
        finally:
            worker.stop()
            results.close()
            site.shutdown()
            site.server_close()
