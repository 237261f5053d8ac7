"""The one OpenAI-compatible client against a tiny local HTTP server: the API key it sends, the
reasoning it strips, and its retry policy (what is retried, how often, after how long)."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import openai
import pytest

from infra.openai_client import (
    PLACEHOLDER_API_KEY,
    AsyncChatClient,
    ChatClient,
    ChatEndpoint,
    NoValidReply,
    ReplyError,
    RetryPolicy,
    json_reply,
    resolve_api_key,
    strip_reasoning,
)


def completion(content: str, finish_reason: str = "stop") -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1_795_000_000,
        "model": "served-model",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish_reason,
                "logprobs": {
                    "content": [
                        {"token": "a", "logprob": -0.5, "bytes": None, "top_logprobs": []},
                        {"token": "b", "logprob": -1.5, "bytes": None, "top_logprobs": []},
                    ]
                },
            }
        ],
    }


class ChatServer:
    """A local `/v1/chat/completions` that answers from a script, (status, body) per request
    (the last entry repeats), and records each request's Authorization header and body."""

    def __init__(self, script: list[tuple[int, dict[str, Any]]]):
        self.script = list(script)
        self.requests: list[dict[str, Any]] = []
        self.keys: list[str | None] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                length = int(self.headers["Content-Length"])
                server.requests.append(json.loads(self.rfile.read(length)))
                server.keys.append(self.headers.get("Authorization"))
                status, body = server.script.pop(0) if len(server.script) > 1 else server.script[0]
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


@pytest.fixture
def serve() -> Iterator[Any]:
    servers: list[ChatServer] = []

    def start(*script: tuple[int, dict[str, Any]]) -> ChatServer:
        servers.append(ChatServer(list(script)))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


@pytest.fixture
def no_env_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def ok(text: str, finish_reason: str = "stop") -> tuple[int, dict[str, Any]]:
    return 200, completion(text, finish_reason)


def error(status: int) -> tuple[int, dict[str, Any]]:
    return status, {"error": {"message": f"status {status}", "type": "error", "code": status}}


def client(server: ChatServer, pauses: list[float] | None = None, **options: Any) -> ChatClient:
    sleep = pauses.append if pauses is not None else (lambda seconds: None)
    return ChatClient(ChatEndpoint(server.url, "m", timeout_s=10, **options), sleep=sleep)


MESSAGES = [{"role": "user", "content": 'Reply with {"answer": ...}.'}]


def answer(text: str) -> str:
    return json_reply(text, {"answer"})["answer"]


# -- the API key -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "environment", "sent"),
    [
        ("sk-given", {"OPENAI_API_KEY": "sk-env"}, "sk-given"),
        (None, {"OPENAI_API_KEY": "sk-env"}, "sk-env"),
        ("", {"OPENAI_API_KEY": "sk-env"}, "sk-env"),
        (PLACEHOLDER_API_KEY, {"OPENAI_API_KEY": "sk-env"}, "sk-env"),
        (None, {}, PLACEHOLDER_API_KEY),
        (None, {"OPENAI_API_KEY": ""}, PLACEHOLDER_API_KEY),
        ("sk-given", {}, "sk-given"),
    ],
)
def test_an_explicit_key_wins_then_the_environment_then_the_placeholder(given, environment, sent):
    assert resolve_api_key(given, environment) == sent


def test_the_environments_key_reaches_the_server(serve, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    server = serve(ok("{}"))
    client(server).complete(MESSAGES)
    client(server, api_key="sk-given").complete(MESSAGES)
    client(server, api_key=PLACEHOLDER_API_KEY).complete(MESSAGES)
    assert server.keys == ["Bearer sk-from-env", "Bearer sk-given", "Bearer sk-from-env"]


def test_a_keyless_local_server_gets_the_placeholder(serve, no_env_key):
    server = serve(ok("{}"))
    client(server).complete(MESSAGES)
    asyncio.run(AsyncChatClient(ChatEndpoint(server.url, "m")).complete(MESSAGES))
    assert server.keys == [f"Bearer {PLACEHOLDER_API_KEY}"] * 2


# -- reasoning -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "left"),
    [
        ('<think>\nThe answer is 4.\n</think>\n\n{"answer": 4}', '{"answer": 4}'),
        ('  <THINK>a</THINK><think>b</think> {"answer": 4}', '{"answer": 4}'),
        ("<think>\nStill thinking when the tokens ran out", ""),
        ('The prompt opened the block.\n</think>\n{"answer": 4}', '{"answer": 4}'),
        ('{"answer": "<think>x</think>"}', '{"answer": "<think>x</think>"}'),
        ('{"answer": 4}\n', '{"answer": 4}\n'),
        ("", ""),
    ],
)
def test_reasoning_is_stripped_before_parsing(text, left):
    assert strip_reasoning(text) == left


def test_json_reply_parses_after_the_reasoning_and_is_strict():
    assert json_reply('<think>hm</think>```json\n{"answer": 4}\n```', {"answer"}) == {"answer": 4}
    with pytest.raises(ReplyError, match="empty reply"):
        json_reply("<think>never closed", {"answer"})
    with pytest.raises(ReplyError, match=r"the reply has unknown keys \['x'\]"):
        json_reply('{"answer": 4, "x": 1}', {"answer"})
    with pytest.raises(ReplyError, match="the reply has no answer"):
        json_reply("{}", {"answer"})


def test_ask_validates_the_reply_without_its_reasoning(serve, no_env_key):
    server = serve(ok('<think>2 + 2</think>{"answer": 4}'))
    assert client(server).ask(MESSAGES, answer) == 4


# -- the retry policy ------------------------------------------------------------------------


@pytest.mark.parametrize("status", [408, 409, 429, 500, 503])
def test_transient_statuses_are_retried_after_a_backoff(serve, no_env_key, status):
    server = serve(error(status), ok('{"answer": 4}'))
    pauses: list[float] = []
    llm = client(server, pauses, backoff_s=0.25)
    assert llm.ask(MESSAGES, answer) == 4
    assert (llm.calls, len(server.requests), pauses) == (2, 2, [0.25])
    assert server.requests[0]["messages"] == server.requests[1]["messages"]


def test_the_backoff_doubles_and_is_capped(serve, no_env_key):
    server = serve(error(503))
    pauses: list[float] = []
    llm = client(server, pauses, max_attempts=7, backoff_s=0.5)
    with pytest.raises(NoValidReply) as caught:
        llm.complete(MESSAGES)
    assert pauses == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0]
    assert len(server.requests) == 7  # the SDK's own retries are off
    assert caught.value.exhausted and caught.value.attempts == 7
    assert caught.value.reason.startswith(
        "no valid reply after 7 attempt(s); last: API error: InternalServerError: "
    )


def test_an_unreachable_server_is_retried_then_rejected(no_env_key):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again: nothing listens there
    pauses: list[float] = []
    llm = ChatClient(
        ChatEndpoint(f"http://127.0.0.1:{port}/v1", "m", timeout_s=5), sleep=pauses.append
    )
    with pytest.raises(NoValidReply) as caught:
        llm.complete(MESSAGES)
    assert llm.calls == 3 and pauses == [0.5, 1.0]
    assert caught.value.problem == "API error: APIConnectionError: Connection error."


def test_a_refused_request_is_rejected_at_once(serve, no_env_key):
    server = serve(error(400))
    pauses: list[float] = []
    with pytest.raises(NoValidReply) as caught:
        client(server, pauses).ask(MESSAGES, answer)
    assert len(server.requests) == 1 and pauses == []
    assert not caught.value.exhausted
    assert caught.value.reason.startswith("API error: BadRequestError: Error code: 400")


@pytest.mark.parametrize(
    ("status", "raised"),
    [
        (401, openai.AuthenticationError),
        (403, openai.PermissionDeniedError),
        (404, openai.NotFoundError),
    ],
)
def test_configuration_errors_are_raised_as_they_are(serve, no_env_key, status, raised):
    server = serve(error(status))
    with pytest.raises(raised):
        client(server).ask(MESSAGES, answer)
    assert len(server.requests) == 1


def test_a_bad_reply_is_retried_at_once_showing_the_model_its_reply(serve, no_env_key):
    server = serve(ok("<think>hm</think>Four."), ok('{"answer": 4}'))
    pauses: list[float] = []
    assert client(server, pauses).ask(MESSAGES, answer) == 4
    assert pauses == []
    retry = server.requests[1]["messages"]
    assert retry[0] == MESSAGES[0]
    assert retry[1] == {"role": "assistant", "content": "Four."}
    assert retry[2]["content"] == (
        "Your reply was rejected: reply is not a JSON object: 'Four.'. "
        "Reply again with the JSON object only."
    )


def test_bad_replies_until_the_attempts_run_out(serve, no_env_key):
    server = serve(ok("Four."))
    llm = client(server, max_attempts=2)
    with pytest.raises(NoValidReply) as caught:
        llm.ask(MESSAGES, answer)
    assert llm.calls == 2
    assert caught.value.reason == (
        "no valid reply after 2 attempt(s); last: bad reply: reply is not a JSON object: 'Four.'"
    )
    # Only the latest bad reply is shown back: the prompt stays bounded.
    assert len(server.requests[1]["messages"]) == 3


def test_a_reply_cut_at_max_tokens_is_a_bad_reply_even_if_it_parses(serve, no_env_key):
    server = serve(ok('{"answer": 4}', finish_reason="length"))
    with pytest.raises(NoValidReply, match=r"reply cut at max_tokens=16 \(finish_reason"):
        client(server, max_tokens=16, max_attempts=1).ask(MESSAGES, answer)


def test_complete_returns_any_reply_with_its_log_probabilities(serve, no_env_key):
    server = serve(ok("<think>raw</think>click(1, 2)", finish_reason="length"))
    reply = client(server).complete(MESSAGES, model="adapter-7", top_p=0.9, logprobs=True)
    assert reply.text == "<think>raw</think>click(1, 2)"  # as the model wrote it
    assert (reply.finish_reason, reply.model) == ("length", "served-model")
    assert reply.logprobs == [-0.5, -1.5]
    (request,) = server.requests
    assert (request["model"], request["top_p"], request["max_tokens"]) == ("adapter-7", 0.9, 512)


def test_the_async_client_follows_the_same_policy(serve, no_env_key):
    server = serve(error(503), ok("Four."), ok('{"answer": 4}'))
    pauses: list[float] = []

    async def sleep(seconds: float) -> None:
        pauses.append(seconds)

    llm = AsyncChatClient(ChatEndpoint(server.url, "m", timeout_s=10), sleep=sleep)
    assert asyncio.run(llm.ask(MESSAGES, answer)) == 4
    assert llm.calls == 3 and pauses == [0.5]
    assert server.requests[2]["messages"][1] == {"role": "assistant", "content": "Four."}


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="max_attempts must be at least 1"):
        RetryPolicy(max_attempts=0)
    with pytest.raises(ValueError, match="backoff_s must be 0 or more"):
        RetryPolicy(backoff_s=-1)
    with pytest.raises(ValueError, match="max_tokens must be at least 1"):
        ChatEndpoint("http://llm.invalid/v1", "m", max_tokens=0)
