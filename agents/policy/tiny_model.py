"""A tiny, randomly initialised Qwen3-VL checkpoint for tests and CPU runs.

`build_tiny_vl_model(out_dir)` writes a directory that loads exactly like a real Qwen3-VL
checkpoint (`AutoProcessor.from_pretrained(out_dir)`,
`Qwen3VLForConditionalGeneration.from_pretrained(out_dir)`), so every code path that serves,
prompts, parses or fine-tunes a policy can run end to end on CPU in seconds.

Guarantees:

- Offline: nothing is downloaded; the tokenizer is trained here on a built-in corpus.
- Deterministic: the same `seed` (and the same transformers/tokenizers versions) gives the same
  weights and byte-identical tokenizer files.
- Small: under 5M parameters (about 0.56M, vocabulary ~2.9k); built in well under a second once
  transformers is imported; a 1280x768 screenshot is resized to 256x128 and becomes 32 vision
  tokens (`max_pixels` = 40 merged 32x32 patches).
- Qwen-compatible text interface: the Qwen chat special tokens (`<|im_start|>`, `<|im_end|>`,
  `<|endoftext|>`, `<|vision_start|>`, `<|image_pad|>`, ...) and the non-special `<tool_call>`
  / `</tool_call>` tokens exist and are single tokens, and the chat template renders
  `<|im_start|>role\\n...<|im_end|>` turns with image parts and `add_generation_prompt`.

The weights are random: the model emits vocabulary tokens, never sensible actions. Like every
Qwen-VL processor in transformers 5, loading needs `torchvision` (for the video processor).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers, trainers
from transformers import (
    GenerationConfig,
    Qwen2Tokenizer,
    Qwen3VLConfig,
    Qwen3VLForConditionalGeneration,
    Qwen3VLProcessor,
    Qwen3VLVideoProcessor,
)
from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

BPE_VOCAB_SIZE = 3000

# Same order as the real Qwen2/2.5/3-VL vocabularies (ids 151643..151658 there).
SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
]
# Not special in Qwen: they survive `skip_special_tokens=True`, which the reply parser relies on.
TEXT_TOKENS = ["<tool_call>", "</tool_call>"]

PATCH_SIZE = 16
MERGE_SIZE = 2
TEMPORAL_PATCH_SIZE = 2
_FACTOR = PATCH_SIZE * MERGE_SIZE
MIN_PIXELS = 4 * _FACTOR * _FACTOR
MAX_PIXELS = 40 * _FACTOR * _FACTOR

# Qwen2-VL style template (the Qwen3-VL one minus tools and reasoning), no default system turn.
CHAT_TEMPLATE = r"""
{%- set image_count = namespace(value=0) -%}
{%- for message in messages -%}
    {{- '<|im_start|>' + message['role'] + '\n' -}}
    {%- if message['content'] is string -%}
        {{- message['content'] -}}
    {%- else -%}
        {%- for content in message['content'] -%}
            {%- if content['type'] == 'image' or 'image' in content or 'image_url' in content -%}
                {%- set image_count.value = image_count.value + 1 -%}
                {%- if add_vision_id -%}
                    {{- 'Picture ' + image_count.value | string + ': ' -}}
                {%- endif -%}
                {{- '<|vision_start|><|image_pad|><|vision_end|>' -}}
            {%- elif content['type'] == 'video' or 'video' in content -%}
                {{- '<|vision_start|><|video_pad|><|vision_end|>' -}}
            {%- elif 'text' in content -%}
                {{- content['text'] -}}
            {%- endif -%}
        {%- endfor -%}
    {%- endif -%}
    {{- '<|im_end|>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{- '<|im_start|>assistant\n' -}}
{%- endif -%}
""".strip()

_CORPUS = """\
You are a helpful assistant that operates a web browser to complete tasks for the user.
The screen shows a web page. Look at the screenshot, think about the next step, and act.
Thought: The search box is at the top of the page. I should click it and type the query.
Action: Click the search box and type the name of the product.
Memory: The user wants the cheapest red shirt. I have opened the shop home page.
<tool_call>
{"name": "computer_use", "arguments": {"action": "left_click", "coordinate": [512, 88]}}
</tool_call>
<tool_call>
{"name": "computer_use", "arguments": {"action": "type", "text": "red shirt"}}
</tool_call>
<tool_call>
{"name": "computer_use", "arguments": {"action": "scroll", "direction": "down", "pixels": 500}}
</tool_call>
<tool_call>
{"name": "computer_use", "arguments": {"action": "wait", "time": 2}}
</tool_call>
<tool_call>
{"name": "computer_use", "arguments": {"action": "go_back"}}
</tool_call>
<tool_call>
{"name": "computer_use", "arguments": {"action": "navigate", "url": "https://example.com/"}}
</tool_call>
<tool_call>
{"name": "computer_use", "arguments": {"action": "answer", "text": "The price is 19.99 dollars."}}
</tool_call>
Task: Find the opening hours of the city library on Saturday and report them.
Previous steps: 1. clicked the menu. 2. typed the address. 3. scrolled down the page.
The page lists news, events, products, prices, reviews, contact details and a login form.
Buttons: Search, Submit, Next, Previous, Add to cart, Sign in, Cancel, OK, Close, More.
The quick brown fox jumps over the lazy dog. Numbers: 0 1 2 3 4 5 6 7 8 9 10 100 1000.
Coordinates are normalised to the range 0 to 1000 in both directions, x first, then y.
If the task is complete, answer with the result; otherwise choose exactly one action.
"""

_WORDS = """
system user assistant tool role content image text thought action memory answer task goal step
left_click right_click double_click type key scroll wait go_back navigate coordinate direction
pixels time url name arguments computer_use element mark label button link input field box
the be to of and a in that have it for not on with he as you do at this but his by from they we
say her she or an will my one all would there their what so up out if about who get which go me
when make can like no just him know take people into year your good some could them see other
than then now look only come its over think also back after use two how our work first well way
even new want because any these give day most us is are was were been has had did does said made
page site web browser screen window tab menu search home shop cart price product order account
login sign register password email address phone number date open close next previous submit
cancel save delete edit add remove select choose option list table row column item items result
results find show hide click press enter return form filter sort category news event events
review reviews rating comment comments post title description details contact help support
about blog article city library hours opening saturday sunday monday today tomorrow weather
map location store restaurant hotel flight ticket book booking price cheap cheapest best top
red blue green black white large small medium size color shirt shoes dress bag phone laptop
please error warning message loading done complete success failed retry again more less
first last second third above below left right middle center top bottom corner header footer
sidebar panel dialog popup banner image video audio file download upload share print copy paste
quantity total tax shipping free delivery checkout payment card visa name street zip country
""".split()


def _train_tokenizer() -> Qwen2Tokenizer:
    """Byte-level BPE with Qwen2's normaliser and pre-tokeniser, then Qwen's added tokens."""
    bpe = Tokenizer(models.BPE())
    bpe.normalizer = normalizers.NFC()
    bpe.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    trainer = trainers.BpeTrainer(
        vocab_size=BPE_VOCAB_SIZE,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    lines = _CORPUS.splitlines() + [
        f"{w} {w.capitalize()} {w.upper()} the {w}, a {w}. {w}s" for w in _WORDS
    ]
    bpe.train_from_iterator(lines, trainer=trainer)
    model = json.loads(bpe.to_str())["model"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    tokenizer = Qwen2Tokenizer(
        vocab=model["vocab"],
        merges=merges,
        unk_token=None,
        model_max_length=32768,
        padding_side="left",  # decoder-only batch generation
    )
    tokenizer.add_tokens(SPECIAL_TOKENS, special_tokens=True)
    tokenizer.add_tokens(TEXT_TOKENS, special_tokens=False)
    tokenizer.eos_token = "<|im_end|>"  # the end of an assistant turn, as in Qwen-VL instruct
    tokenizer.pad_token = "<|endoftext|>"
    return tokenizer


def _config(tokenizer: Qwen2Tokenizer) -> Qwen3VLConfig:
    text_hidden = 64
    ids = tokenizer.convert_tokens_to_ids
    return Qwen3VLConfig(
        text_config={
            "vocab_size": len(tokenizer),
            "hidden_size": text_hidden,
            "intermediate_size": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "max_position_embeddings": 4096,
            # Interleaved 3-D rope over (time, height, width); the sections sum to head_dim / 2.
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 10000.0,
                "mrope_section": [4, 2, 2],
                "mrope_interleaved": True,
            },
            "pad_token_id": ids("<|endoftext|>"),
        },
        vision_config={
            "depth": 2,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_heads": 2,
            "patch_size": PATCH_SIZE,
            "spatial_merge_size": MERGE_SIZE,
            "temporal_patch_size": TEMPORAL_PATCH_SIZE,
            "out_hidden_size": text_hidden,
            "num_position_embeddings": 64,  # an 8x8 grid, interpolated to any image size
            "deepstack_visual_indexes": [0],
        },
        image_token_id=ids("<|image_pad|>"),
        video_token_id=ids("<|video_pad|>"),
        vision_start_token_id=ids("<|vision_start|>"),
        vision_end_token_id=ids("<|vision_end|>"),
        tie_word_embeddings=False,
    )


def build_tiny_vl_model(out_dir: Path, seed: int = 0) -> Path:
    """Write a tiny random Qwen3-VL checkpoint (weights, config, processor) to `out_dir`.

    Offline and deterministic in `seed`; see the module docstring for what the checkpoint
    guarantees. Returns `out_dir`.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = _train_tokenizer()
    image_processor = Qwen2VLImageProcessorPil(
        patch_size=PATCH_SIZE,
        temporal_patch_size=TEMPORAL_PATCH_SIZE,
        merge_size=MERGE_SIZE,
        min_pixels=MIN_PIXELS,
        max_pixels=MAX_PIXELS,
        image_mean=[0.5, 0.5, 0.5],  # Qwen3-VL's normalisation
        image_std=[0.5, 0.5, 0.5],
    )
    # Qwen-VL processors always carry a video processor (it needs torchvision); we never feed video.
    video_processor = Qwen3VLVideoProcessor(
        patch_size=PATCH_SIZE,
        temporal_patch_size=TEMPORAL_PATCH_SIZE,
        merge_size=MERGE_SIZE,
        size={"shortest_edge": MIN_PIXELS, "longest_edge": MAX_PIXELS},
    )
    processor = Qwen3VLProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        video_processor=video_processor,
        chat_template=CHAT_TEMPLATE,
    )
    config = _config(tokenizer)
    with torch.random.fork_rng(devices=[]):  # do not disturb the caller's RNG
        torch.manual_seed(seed)
        model = Qwen3VLForConditionalGeneration(config)
    model.generation_config = GenerationConfig(
        eos_token_id=[tokenizer.convert_tokens_to_ids(t) for t in ("<|im_end|>", "<|endoftext|>")],
        pad_token_id=tokenizer.pad_token_id,
        do_sample=False,
    )
    model.save_pretrained(out_dir)
    processor.save_pretrained(out_dir)
    return out_dir
