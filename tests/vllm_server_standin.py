"""A stand-in for `vllm serve --enable-lora` (runtime LoRA updating on): stdlib `http.server` on
127.0.0.1 that implements `POST /v1/load_lora_adapter` and `POST /v1/chat/completions` as vLLM
answers them, and records every request it got.

Like vLLM: loading a name twice is a 400 ("... has already been loaded"), and a chat request for a
model that is neither the base nor a loaded adapter is a 404. A reply names the model it was asked
for, so a test can tell which weights "answered".
"""

from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler

from infra.ports import loopback_server


class StandInVLLMServer:
    def __init__(self, base_model: str, reply: str = "Thought: hi"):
        self.base_model = base_model
        self.reply = reply
        self.adapters: dict[str, str] = {}  # lora_name -> lora_path
        self.loads: list[dict] = []  # every load request body, in order
        self.chats: list[dict] = []  # every chat request body, in order
        self._lock = threading.Lock()

    def handle(self, path: str, body: dict) -> tuple[int, dict | str]:
        with self._lock:
            if path == "/v1/load_lora_adapter":
                self.loads.append(body)
                name = body["lora_name"]
                if name in self.adapters:
                    message = f"The lora adapter '{name}' has already been loaded."
                    return 400, {"object": "error", "message": message, "code": 400}
                self.adapters[name] = body["lora_path"]
                return 200, f"Success: LoRA adapter '{name}' added successfully."
            if path == "/v1/chat/completions":
                self.chats.append(body)
                model = body["model"]
                if model != self.base_model and model not in self.adapters:
                    message = f"The model `{model}` does not exist."
                    return 404, {"object": "error", "message": message, "code": 404}
                return 200, _completion(model, f"{self.reply} ({model})")
        return 404, {"object": "error", "message": f"no route {path}", "code": 404}


def _completion(model: str, text: str) -> dict:
    return {
        "id": "chatcmpl-standin",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
                "logprobs": {
                    "content": [
                        {"token": "a", "logprob": -0.25, "bytes": None, "top_logprobs": []},
                        {"token": "b", "logprob": -1.5, "bytes": None, "top_logprobs": []},
                    ]
                },
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    }


@contextmanager
def serving(server: StandInVLLMServer):
    """Serve ``server`` on a free loopback port; yields the base URL (``http://.../v1``)."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the http.server name
            length = int(self.headers.get("Content-Length", 0))
            status, answer = server.handle(self.path, json.loads(self.rfile.read(length) or b"{}"))
            data = (answer if isinstance(answer, str) else json.dumps(answer)).encode()
            self.send_response(status)
            kind = "text/plain" if isinstance(answer, str) else "application/json"
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args) -> None:
            pass

    with loopback_server(Handler, "/v1") as url:
        yield url
