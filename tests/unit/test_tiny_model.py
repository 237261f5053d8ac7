"""The tiny Qwen3-VL checkpoint and the local transformers backend, on CPU, offline."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import torch
from PIL import Image, ImageDraw
from safetensors.torch import load_file
from transformers import AutoProcessor, Qwen3VLForConditionalGeneration

from agents.policy.backends import ChatRequest, Generation
from agents.policy.backends.local import LocalBackend
from agents.policy.tiny_model import build_tiny_vl_model

MAX_NEW_TOKENS = 8


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_vl_model(tmp_path_factory.mktemp("tiny") / "tiny-qwen3-vl", seed=0)


@pytest.fixture(scope="module")
def backend(checkpoint: Path) -> LocalBackend:
    return LocalBackend(checkpoint, max_new_tokens=MAX_NEW_TOKENS)


def _screenshot_jpeg() -> bytes:
    image = Image.new("RGB", (1280, 768), (245, 245, 245))
    draw = ImageDraw.Draw(image)
    draw.rectangle([40, 20, 1240, 80], fill=(30, 80, 200))
    draw.rectangle([480, 300, 800, 350], outline=(0, 0, 0), width=2)
    draw.text((500, 315), "Search products", fill=(0, 0, 0))
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=85)
    return buffer.getvalue()


def _requests() -> list[ChatRequest]:
    return [
        ChatRequest(
            [
                {"role": "system", "content": "You operate a web browser."},
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "Task: find a red shirt."},
                        {"type": "image", "image": _screenshot_jpeg()},
                        {"type": "text", "text": "Reply with Thought, Action, Memory."},
                    ],
                },
            ]
        ),
        ChatRequest([{"role": "user", "content": "Thought: the page is loading."}]),
        ChatRequest([{"role": "user", "content": [{"type": "text", "text": "Memory: none"}]}]),
    ]


def test_checkpoint_loads_like_a_real_one(checkpoint: Path) -> None:
    processor = AutoProcessor.from_pretrained(checkpoint)
    model = Qwen3VLForConditionalGeneration.from_pretrained(checkpoint)
    tokenizer = processor.tokenizer
    for token in ("<|im_start|>", "<|im_end|>", "<|image_pad|>", "<tool_call>", "</tool_call>"):
        assert len(tokenizer(token)["input_ids"]) == 1, token
    assert 8000 <= len(tokenizer) <= 8200  # BPE 8,000 + Qwen's and the prompt's added tokens
    assert model.config.image_token_id == tokenizer.convert_tokens_to_ids("<|image_pad|>")
    reply = '<tool_call>\n{"action": "left_click", "coordinate": [500, 80]}\n</tool_call>'
    ids = tokenizer(reply + "<|im_end|>")["input_ids"]
    assert tokenizer.decode(ids, skip_special_tokens=True) == reply

    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Go"}]}]
    text = processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert text == (
        "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>Go<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    screenshot = Image.open(io.BytesIO(_screenshot_jpeg()))
    inputs = processor(text=[text], images=[screenshot], return_tensors="pt")
    image_tokens = int((inputs["input_ids"] == model.config.image_token_id).sum())
    assert 8 <= image_tokens <= 64  # a few dozen vision tokens for a 1280x768 screenshot


def test_parameter_count_is_tiny(checkpoint: Path) -> None:
    model = Qwen3VLForConditionalGeneration.from_pretrained(checkpoint)
    assert sum(p.numel() for p in model.parameters()) < 5_000_000


def test_build_is_deterministic(checkpoint: Path, tmp_path: Path) -> None:
    again = build_tiny_vl_model(tmp_path / "again", seed=0)
    first, second = (
        load_file(checkpoint / "model.safetensors"),
        load_file(again / "model.safetensors"),
    )
    assert first.keys() == second.keys()
    assert all(torch.equal(first[name], second[name]) for name in first)
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        assert (checkpoint / name).read_bytes() == (again / name).read_bytes(), name

    other = load_file(build_tiny_vl_model(tmp_path / "other", seed=1) / "model.safetensors")
    assert not all(torch.equal(first[name], other[name]) for name in first)


def test_generate_batch_returns_aligned_tokens_and_logprobs(backend: LocalBackend) -> None:
    generations = backend.generate(_requests())
    assert len(generations) == 3
    for generation in generations:
        assert isinstance(generation, Generation)
        assert isinstance(generation.text, str)
        assert 0 < len(generation.token_ids) <= MAX_NEW_TOKENS
        assert len(generation.logprobs) == len(generation.token_ids)
        assert all(logprob <= 0.0 for logprob in generation.logprobs)
        assert generation.latency_ms > 0
        assert generation.model == "tiny-qwen3-vl"


def test_greedy_generation_is_deterministic(backend: LocalBackend) -> None:
    first, second = backend.generate(_requests()), backend.generate(_requests())
    assert [g.token_ids for g in first] == [g.token_ids for g in second]
    assert [g.logprobs for g in first] == [g.logprobs for g in second]
    assert [g.text for g in first] == [g.text for g in second]


def test_sampling_is_reproducible_and_leaves_the_global_rng_alone(checkpoint: Path) -> None:
    requests = _requests()[1:]
    runs = [
        LocalBackend(checkpoint, max_new_tokens=MAX_NEW_TOKENS, temperature=1.0, seed=7)
        for _ in range(2)
    ]
    rng_state = torch.get_rng_state()
    first, second = (run.generate(requests) for run in runs)
    assert torch.equal(rng_state, torch.get_rng_state())
    assert [g.token_ids for g in first] == [g.token_ids for g in second]
    assert all(0 < len(g.token_ids) == len(g.logprobs) for g in first)


def test_tokenizer_reads_the_prompt_and_the_pages_in_few_tokens(checkpoint: Path) -> None:
    """What makes the tiny policy trainable on a CPU: short contexts, page words whole."""
    from agents.policy.tiny_model import TOOL_CALL_PREFIX
    from schemas.prompt.context import Current, build_context, system_prompt
    from tasks.miniwob import word_lists

    tokenizer = AutoProcessor.from_pretrained(checkpoint).tokenizer
    for mode in ("coordinate", "set_of_marks"):
        prompt = system_prompt(mode)
        # Each fixed line is one token; the newlines between them are the rest.
        assert len(tokenizer(prompt)["input_ids"]) <= 2 * len(prompt.splitlines())
    assert len(tokenizer(TOOL_CALL_PREFIX)["input_ids"]) == 1
    lists = word_lists()
    for word in [*lists["FIFTY_NAMES"], *lists["button_words"], *lists["lorem_words"][:60]]:
        # As the instruction, the marks table and the reply's JSON write it: one token.
        assert len(tokenizer.tokenize(f' "{word}"')) <= 3, word

    marks = [{"id": str(i), "role": "button", "name": n} for i, n in enumerate(["ok", "no", "x"])]
    context = build_context(
        'MiniWoB++ click-button: do what the instruction says.\nThe page says: Click on the "no"'
        " button.",
        [],
        Current(step=1, observation_event_id="o", title="", url="http://miniwob.webgym.test/"),
        mode="set_of_marks",
    )
    messages = [
        {**m, "content": [p for p in m["content"] if p["type"] == "text"]}
        if isinstance(m["content"], list)
        else m
        for m in context.messages
    ]
    text = AutoProcessor.from_pretrained(checkpoint).apply_chat_template(
        messages, tokenize=False, add_generation_prompt=True
    )
    assert len(tokenizer(text)["input_ids"]) < 250, marks  # about 950 with a generic tokenizer
