"""A tiny Qwen3-VL checkpoint that can learn web tasks on a CPU, built offline.

`build_tiny_vl_model(out_dir)` writes a directory that loads exactly like a real Qwen3-VL
checkpoint, so every code path that serves, prompts, parses or fine-tunes a policy runs end to
end on CPU. Its weights are random: it starts knowing nothing (0% on MiniWoB++) and learns through
the loop. Guarantees: offline (nothing is downloaded); deterministic in `seed` (with the same
transformers/tokenizers/miniwob versions); a Qwen-compatible text interface (see
:func:`build_tiny_vl_model`). Like every Qwen-VL processor in transformers 5, loading needs
`torchvision` (for the video processor).
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

from schemas.prompt.context import marks_table, system_prompt
from schemas.prompt.reply import TOOL_NAME, format_reply
from sites import vocab
from tasks.miniwob import word_lists

BPE_VOCAB_SIZE = 8000

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
# Every reply's tool call starts with these characters (`parser.format_reply`): one token.
TOOL_CALL_PREFIX = f'{{"name": "{TOOL_NAME}", "arguments": {{"action": "'
PROMPT_LINE_MIN_CHARS = 16  # shorter system-prompt lines are left to BPE

# Few vision tokens: a 1280x768 screenshot becomes 15 vision tokens (`MAX_PIXELS`: at most 16
# merged 32x32 patches). The tiny model acts through set-of-marks (the marks table names every
# element it can act on); its vision tower is kept, small, so the checkpoint stays a Qwen-VL model
# that sees the screenshot.
PATCH_SIZE = 16
MERGE_SIZE = 2
TEMPORAL_PATCH_SIZE = 2
_FACTOR = PATCH_SIZE * MERGE_SIZE
MIN_PIXELS = 4 * _FACTOR * _FACTOR
MAX_PIXELS = 16 * _FACTOR * _FACTOR

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


# Roles the marks table names (`agents.browser.page_script.MARKS`).
_ROLES = (
    "button",
    "text",
    "link",
    "clickable",
    "checkbox",
    "radio",
    "password",
    "submit",
    "tab",
    "textarea",
    "select",
    "email",
    "number",
    "search",
    "summary",
    "a",
    "menuitem",
)
# How often each word of the MiniWoB++ pages' own lists is shown to the BPE trainer, so that
# every one of them (and its capitalised form) becomes a single token.
_PAGE_WORD_REPEATS = 10


def prompt_lines() -> list[str]:
    """The fixed lines of both system prompts that become single added tokens."""
    lines = {
        line
        for mode in ("coordinate", "set_of_marks")
        for line in system_prompt(mode).splitlines()
        if len(line) >= PROMPT_LINE_MIN_CHARS
    }
    return sorted(lines)


def _tokenizer_corpus() -> list[str]:
    """What the policy will read and write: prompts, replies, marks tables, page words."""
    lines = _CORPUS.splitlines() + [system_prompt("coordinate"), system_prompt("set_of_marks")]
    lines += [f"{w} {w.capitalize()} {w.upper()} the {w}, a {w}. {w}s" for w in _WORDS]
    lists = word_lists()
    key_words = sorted(
        {
            w
            for name in ("FIFTY_NAMES", "lorem_words", "COLORS", "button_words")
            for w in lists[name]
        }
    )
    for word in key_words:
        for form in sorted({word, word.lower(), word.capitalize()}):
            lines += [
                f'The page says: Click on the "{form}" button. [3] button "{form}" "text": "{form}"'
            ] * _PAGE_WORD_REPEATS
    lines += [f"\"{w}\" '{w}' {w}" for name in sorted(lists) for w in lists[name]]
    lines += [
        " ".join(str(v) for v in values)
        for name in sorted(vars(vocab))
        if isinstance(values := getattr(vocab, name), tuple)
    ]
    for i in range(64):
        lines.append(marks_table([{"id": str(i), "role": r, "name": "word"} for r in _ROLES]))
        for kind in ("left_click", "type", "answer"):
            action = {"kind": kind, "element_id": str(i), "text": "word"}
            if kind == "answer":
                action = {"kind": kind, "text": f"{i} word"}
            lines.append(
                format_reply(action, f"Step {i % 5 + 1} of {i % 4 + 1}.", kind, f"progress {i % 6}")
            )
        lines.append(
            f"Step {i}. Memory: progress {i % 6}\nPage: Task (http://miniwob.webgym.test/"
            f"miniwob/click-button.html)\nThe last action failed: element {i} not found"
        )
    return lines


def _train_tokenizer() -> Qwen2Tokenizer:
    """Byte-level BPE with Qwen2's normaliser and pre-tokeniser, then Qwen's added tokens.

    Trained on what it will read and write: 8,000 merges, Qwen2's pre-tokeniser (so a word never
    merges with its neighbours and a name in the instruction is the same tokens as in the reply
    that types it), trained on both system prompts, the reply format, marks tables, and the word
    lists MiniWoB++ pages draw from (read from the installed `miniwob` package) and the practice
    web's vocabulary. The fixed lines of the system prompts and the tool-call prefix are single
    added tokens: a set-of-marks context shrinks from about 950 tokens to about 240, and a reply
    from 54 to about 30, which is what makes training and sampling fast enough here. A changed
    system prompt still tokenises (byte-level), only longer.
    """
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
    lines = _tokenizer_corpus()
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
    tokenizer.add_tokens([TOOL_CALL_PREFIX, *prompt_lines()], special_tokens=False)
    tokenizer.eos_token = "<|im_end|>"  # the end of an assistant turn, as in Qwen-VL instruct
    tokenizer.pad_token = "<|endoftext|>"
    return tokenizer


def _config(tokenizer: Qwen2Tokenizer) -> Qwen3VLConfig:
    """4 layers of width 128 (4 heads, 2 key-value heads, head dim 32), about 3.2M parameters:
    about 0.1 s per training sample on 2 CPU cores, and enough layers for the
    find-the-named-element lookups MiniWoB++ asks for."""
    text_hidden = 128
    ids = tokenizer.convert_tokens_to_ids
    return Qwen3VLConfig(
        text_config={
            "vocab_size": len(tokenizer),
            "hidden_size": text_hidden,
            "intermediate_size": 512,
            "num_hidden_layers": 4,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 32,
            "max_position_embeddings": 4096,
            # Interleaved 3-D rope over (time, height, width); the sections sum to head_dim / 2.
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 10000.0,
                "mrope_section": [8, 4, 4],
                "mrope_interleaved": True,
            },
            "pad_token_id": ids("<|endoftext|>"),
        },
        vision_config={
            "depth": 1,
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

    Returns `out_dir`. It loads like a real one (`AutoProcessor.from_pretrained(out_dir)`,
    `Qwen3VLForConditionalGeneration.from_pretrained(out_dir)`), and the same recipe runs with a
    real Qwen3-VL on a GPU; the tiny model learns through the loop (behaviour cloning on a
    teacher's successes, then its own). What makes it learnable on 2 CPU cores, each choice
    measured on MiniWoB++ contexts built by `schemas.prompt.context` (the experiment in
    `bench/learning.py` has the figures): a tokenizer trained on what it will read and write
    (:func:`_train_tokenizer`), few vision tokens (the comment above `PATCH_SIZE`), and its size
    (:func:`_config`).

    Guarantees:

    - Offline: nothing is downloaded.
    - Deterministic: the same `seed` (and the same transformers/tokenizers/miniwob versions)
      gives the same weights and byte-identical tokenizer files.
    - Qwen-compatible text interface: the Qwen chat special tokens (`<|im_start|>`,
      `<|im_end|>`, `<|endoftext|>`, `<|vision_start|>`, `<|image_pad|>`, ...) and the
      non-special `<tool_call>` / `</tool_call>` tokens exist and are single tokens, and the chat
      template renders `<|im_start|>role\\n...<|im_end|>` turns with image parts and
      `add_generation_prompt`.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = _train_tokenizer()
    # Both processors must cut the patches the vision tower was configured for (`_config`).
    patching = {
        "patch_size": PATCH_SIZE,
        "temporal_patch_size": TEMPORAL_PATCH_SIZE,
        "merge_size": MERGE_SIZE,
    }
    image_processor = Qwen2VLImageProcessorPil(
        **patching,
        min_pixels=MIN_PIXELS,
        max_pixels=MAX_PIXELS,
        image_mean=[0.5, 0.5, 0.5],  # Qwen3-VL's normalisation
        image_std=[0.5, 0.5, 0.5],
    )
    # Qwen-VL processors always carry a video processor (it needs torchvision); we never feed video.
    video_processor = Qwen3VLVideoProcessor(
        **patching, size={"shortest_edge": MIN_PIXELS, "longest_edge": MAX_PIXELS}
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
