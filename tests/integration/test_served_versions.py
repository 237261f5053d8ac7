"""Serving a trained version for real, on the broker and MinIO: a LoRA adapter the learner's
trainer produced, published with infra.weights, is fetched and served by a policy worker on the
local backend, and the served greedy reply to a request is the learner's own greedy reply for that
version; a swap that fails is retried while the last good version serves, and a version of
another base model is refused."""

from __future__ import annotations

import threading
import time
import uuid

import torch

from agents.policy.main import BackendOptions, backend_factory
from agents.policy.tiny_model import build_tiny_vl_model
from agents.policy.worker import PolicyWorker, PolicyWorkerConfig
from bench.fleet import INSTRUCTION, ask, jpeg
from infra.minio_store import build_minio
from infra.weights import publish_weights
from learner.objective import _template_messages
from learner.samples import Sample
from learner.trainer import Trainer, TrainerConfig
from schemas.prompt.context import Current, build_context
from schemas.prompt.reply import format_reply
from tests.integration.model_servers import tiny_model_fixture  # noqa: F401
from tests.integration.test_policy_worker import _inferences, running

MAX_NEW_TOKENS = 12


def _worker(settings, factory, base_model: str, policy_name: str) -> PolicyWorker:
    config = PolicyWorkerConfig(
        backend_name="local",
        policy_name=policy_name,
        group_id=f"policy-test-{uuid.uuid4().hex[:8]}",
        client_id=f"policy-test-{uuid.uuid4().hex[:6]}",
        base_model=base_model,
        swap_retry_s=0.2,
    )
    return PolicyWorker(settings, config, factory)


def _wait(condition, what: str, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def _request_messages(episode: str, screenshot: bytes) -> list[dict]:
    """The messages of the request `ask(..., episode, screenshot=...)` sends, image included."""
    context = build_context(INSTRUCTION, [], Current(1, f"{episode}:0:observation", "Home",
                                                     "http://a.webgym.test/"))  # fmt: skip
    messages = []
    for message in context.messages:
        content = message["content"]
        if isinstance(content, list):
            content = [
                {"type": "image", "image": screenshot} if part["type"] == "image" else part
                for part in content
            ]
        messages.append({**message, "content": content})
    return messages


def _learner_greedy(trainer: Trainer, messages: list[dict]) -> list[int]:
    """The learner-side model's own greedy reply (token ids, through the first stop token)."""
    template, images = _template_messages(messages)
    prompt = trainer.processor.apply_chat_template(
        template, tokenize=False, add_generation_prompt=True
    )
    inputs = trainer.processor(text=[prompt], images=images or None, return_tensors="pt")
    trainer.model.eval()
    with torch.inference_mode():
        out = trainer.model.generate(
            **inputs,
            do_sample=False,
            temperature=None,
            top_p=None,
            top_k=None,
            max_new_tokens=MAX_NEW_TOKENS,
        )
    ids = out[0, inputs["input_ids"].shape[1] :].tolist()
    eos = trainer.model.generation_config.eos_token_id
    stops = set(eos if isinstance(eos, list) else [eos])
    return ids[: next((i + 1 for i, t in enumerate(ids) if t in stops), len(ids))]


def test_the_served_version_replies_as_the_learner_does(
    settings, producer, make_consumer, tiny_model, tmp_path
):
    name = f"match-{uuid.uuid4().hex[:6]}"
    screenshot = jpeg((200, 40, 40))
    # The learner trains an adapter on a reply to exactly this request, enough to change it.
    trainer = Trainer(TrainerConfig(model=str(tiny_model), lora_rank=8, learning_rate=5e-2))
    reply = format_reply({"kind": "answer", "text": "$12"}, "It costs $12.", "answer", "done")
    sample = Sample("learn", 1, 0, _request_messages("learn", screenshot), reply)
    for _ in range(4):
        trainer.step([sample])
    trainer.save(tmp_path / "adapter")

    options = BackendOptions("local", model=str(tiny_model), max_new_tokens=MAX_NEW_TOKENS)
    worker = _worker(settings, backend_factory(options), str(tiny_model), name)
    with running(worker):
        before = f"base-{uuid.uuid4().hex[:8]}"
        ask(settings, producer, before, screenshot=screenshot)
        base_reply = _inferences(settings, make_consumer, [before])[before]

        client = build_minio(settings)
        publish_weights(client, settings, producer, name, 1, tmp_path / "adapter", str(tiny_model))
        _wait(lambda: worker.serving.version == 1, "version 1 was never served")
        episode = f"served-{uuid.uuid4().hex[:8]}"
        ask(settings, producer, episode, screenshot=screenshot)
        served = _inferences(settings, make_consumer, [episode])[episode]

    assert (base_reply["policy_version"], served["policy_version"]) == (0, 1)
    assert (served["temperature"], served["top_p"]) == (0.0, 1.0)
    learner_ids = _learner_greedy(trainer, _request_messages(episode, screenshot))
    assert served["token_ids"] == learner_ids
    assert served["token_ids"] != base_reply["token_ids"]  # the version changed the reply


def test_a_failed_swap_is_retried_and_another_base_model_refused(
    settings, producer, make_consumer, tiny_model, tmp_path
):
    name = f"swap-{uuid.uuid4().hex[:6]}"
    options = BackendOptions("local", model=str(tiny_model), max_new_tokens=2)
    build = backend_factory(options)
    failures = threading.Semaphore(1)

    def flaky(weights):  # the first load of a version runs out of memory
        if weights is not None and failures.acquire(blocking=False):
            raise MemoryError("out of memory while loading")
        return build(weights)

    version_one = build_tiny_vl_model(tmp_path / "v1", seed=1)
    client = build_minio(settings)
    worker = _worker(settings, flaky, str(tiny_model), name)
    with running(worker):
        publish_weights(client, settings, producer, name, 1, version_one, str(tiny_model))
        _wait(lambda: worker.serving.version == 1, "version 1 was never served after a retry")
        assert worker.status()["swap_failures"] == 1
        assert "out of memory" in worker.status()["last_swap_error"]

        publish_weights(client, settings, producer, name, 2, version_one, "another-base-model")
        _wait(lambda: worker.stats["versions_refused"] == 1, "v2 was neither served nor refused")
        episode = f"swap-{uuid.uuid4().hex[:8]}"
        ask(settings, producer, episode)
        assert _inferences(settings, make_consumer, [episode])[episode]["policy_version"] == 1
    status = worker.status()
    assert (status["serving_version"], status["swap_failures"]) == (1, 1)
