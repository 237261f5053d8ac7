"""Benchmark: does the tiny Qwen-VL policy learn MiniWoB++ by behaviour cloning on this CPU?

The question behind `agents.policy.tiny_model`'s design, answered without Kafka so that only the
model is measured: a teacher (the heuristic set-of-marks policy) plays seeded MiniWoB++ instances
in real headless Chromium; every step of its successful episodes becomes one sample (the context
`schemas.prompt.context` builds, screenshot included, and the teacher's reply), exactly what the
learner would read from `webgym.trajectories.success`. The learner's own `Trainer` (full
fine-tuning) trains the tiny model on them; at fixed sample counts the model itself plays
held-out instances (other seeds) in Chromium, greedy, and its success rate is recorded per task.

Figures:

- tokens per context and per reply (the tokenizer's work), seconds per trained sample;
- held-out success by samples trained, per task and on average, with a 95% Wilson interval;
- the teacher's own success on the same held-out instances (the ceiling behaviour cloning aims at).

Writes bench/results/tiny_policy.json. Run: `.venv/bin/python -m bench.tiny_policy`
(`--help` for sizes). Needs Chromium (`infra/bootstrap.sh`), not the Kafka stack.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import http.server
import json
import random
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from playwright.async_api import Browser, async_playwright
from rich.progress import Progress

from agents.browser.actions import perform
from agents.browser.page_script import MARKS, PAGE_SIGNALS, REMOVE_OVERLAY, SETUPS
from agents.policy.backends import ChatRequest
from agents.policy.backends.heuristic import HeuristicBackend
from agents.policy.backends.local import LocalBackend
from agents.policy.tiny_model import build_tiny_vl_model
from infra.chromium import launch_options
from infra.provenance import provenance, write_result
from infra.settings import Settings
from learner.objective import encode
from learner.samples import Sample
from learner.trainer import Trainer, TrainerConfig
from schemas.prompt.context import Current, Step, build_context
from schemas.prompt.reply import parse_reply
from tasks import miniwob

RESULTS = Path(__file__).parent / "results" / "tiny_policy.json"
PAGES = ("click-button", "click-link", "click-dialog", "focus-text", "enter-text")
VIEWPORT = {"width": 1280, "height": 768}
HORIZON = 5  # every page here needs at most 2 actions


@dataclass
class Episode:
    page: str
    seed: int
    success: bool
    samples: list[Sample]


def _serve_pages() -> tuple[http.server.ThreadingHTTPServer, int]:
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # noqa: D102 - the bench prints its own
            pass

    handler = functools.partial(Quiet, directory=str(miniwob.html_root()))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1]


def _instruction(page: str, seed: int, utterance: str) -> str:
    # As the orchestrator builds it: the task's name, then the words the page shows.
    return f"{miniwob.task_record(page, seed)['task_name']}\nThe page says: {utterance}"


def _with_images(messages: list[dict[str, Any]], images: dict[str, bytes]) -> list[dict]:
    return [
        {
            **m,
            "content": [
                {"type": "image", "image": images[p["observation_event_id"]]}
                if p.get("type") == "image"
                else p
                for p in m["content"]
            ],
        }
        if isinstance(m["content"], list)
        else m
        for m in messages
    ]


async def play(browser: Browser, port: int, page_name: str, seed: int, policy: Any) -> Episode:
    """One seeded MiniWoB++ episode in a fresh context, acted by ``policy`` (a backend)."""
    context = await browser.new_context(viewport=VIEWPORT)
    page = await context.new_page()
    await page.goto(f"http://{miniwob.HOST}:{port}/miniwob/{page_name}.html", wait_until="load")
    if not await page.evaluate(SETUPS["miniwob"], seed):
        raise RuntimeError(f"{page_name}: the page did not accept the MiniWoB++ set-up")
    history: list[Step] = []
    images: dict[str, bytes] = {}
    samples: list[Sample] = []
    success = False
    try:
        for step in range(1, HORIZON + 2):
            marks = await page.evaluate(MARKS, True)
            image = await page.screenshot(type="jpeg", quality=80)
            await page.evaluate(REMOVE_OVERLAY)
            signals = await page.evaluate(PAGE_SIGNALS)
            if signals.get("done") == "true":
                success = float(signals.get("raw_reward", "0")) >= 1.0
                break
            if step > HORIZON:
                break
            event_id = f"{page_name}-{seed}:{step}:observation"
            images[event_id] = image
            title = await page.title()
            current = Current(step, event_id, title, page.url, marks=marks)
            built = build_context(
                _instruction(page_name, seed, signals.get("utterance", "")),
                history,
                current,
                mode="set_of_marks",
            )
            messages = _with_images(built.messages, images)
            reply = (await asyncio.to_thread(policy.generate, [ChatRequest(messages)]))[0].text
            parsed = parse_reply(reply)
            action = getattr(parsed, "action", None)
            samples.append(Sample(f"{page_name}-{seed}", step, None, messages, reply))
            history.append(
                Step(
                    step,
                    event_id,
                    title,
                    page.url,
                    reply,
                    action,
                    parse_error=None if action else getattr(parsed, "reason", "no action"),
                    marks=marks,
                )
            )
            if action is None or action["kind"] in ("wait", "answer"):
                await asyncio.sleep(0.1)
                continue
            try:
                await asyncio.wait_for(perform(page, action, VIEWPORT), 5)
            except Exception:  # noqa: BLE001 - a failed action is the policy's problem, as live
                pass
    finally:
        await context.close()
    return Episode(page_name, seed, success, samples)


async def play_all(
    settings: Settings, port: int, instances: list[tuple[str, int]], policy: Any, label: str
) -> list[Episode]:
    rule = f"--host-resolver-rules=MAP {miniwob.HOST} 127.0.0.1"
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(**launch_options(settings, [rule]))
        try:
            episodes = []
            with Progress(transient=True) as progress:
                bar = progress.add_task(label, total=len(instances))
                for page_name, seed in instances:
                    episodes.append(await play(browser, port, page_name, seed, policy))
                    progress.advance(bar)
            return episodes
        finally:
            await browser.close()


def wilson(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95% Wilson score interval of a success rate."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * ((p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def success_table(episodes: list[Episode]) -> dict[str, Any]:
    by_page: dict[str, list[bool]] = {}
    for episode in episodes:
        by_page.setdefault(episode.page, []).append(episode.success)
    wins = sum(e.success for e in episodes)
    low, high = wilson(wins, len(episodes))
    return {
        "episodes": len(episodes),
        "success": round(wins / max(len(episodes), 1), 4),
        "ci_low": round(low, 4),
        "ci_high": round(high, 4),
        "by_task": {p: round(sum(v) / len(v), 4) for p, v in sorted(by_page.items())},
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train-seeds", type=int, default=80, help="teacher episodes per task")
    parser.add_argument("--heldout-seeds", type=int, default=10, help="held-out episodes per task")
    parser.add_argument("--samples", type=int, default=3200, help="samples to train in all")
    parser.add_argument("--batch", type=int, default=8, help="samples per optimiser step")
    parser.add_argument("--lr", type=float, default=1e-3, help="learning rate (full fine-tuning)")
    parser.add_argument("--eval-at", default="0,800,1600,3200", help="sample counts to evaluate at")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    settings = Settings()
    produced_by = provenance()  # the code as it was when the run began
    server, port = _serve_pages()
    train_instances = [(p, s) for p in PAGES for s in range(args.train_seeds)]
    heldout = [(p, miniwob.HELDOUT_SEED_BASE + s) for p in PAGES for s in range(args.heldout_seeds)]
    started = time.perf_counter()
    teacher = HeuristicBackend()
    taught = asyncio.run(play_all(settings, port, train_instances, teacher, "teacher, training"))
    teacher_heldout = asyncio.run(play_all(settings, port, heldout, teacher, "teacher, held-out"))
    samples = [s for e in taught if e.success for s in e.samples]
    with tempfile.TemporaryDirectory() as tmp:
        base = build_tiny_vl_model(Path(tmp) / "base")
        trainer = Trainer(TrainerConfig(model=str(base), lora_rank=0, learning_rate=args.lr))
        encoded = [encode(trainer.processor, s) for s in samples]
        context_tokens = [int(e["input_ids"].shape[1]) for e in encoded]
        reply_tokens = [int((e["labels"] != -100).sum()) for e in encoded]
        rng = random.Random(0)
        eval_at = sorted({int(x) for x in args.eval_at.split(",")})
        curve, trained, train_s = [], 0, 0.0
        while True:
            if eval_at and trained >= eval_at[0]:
                eval_at.pop(0)
                trainer.save(Path(tmp) / "current")
                policy = LocalBackend(Path(tmp) / "current", max_new_tokens=48)
                played = asyncio.run(
                    play_all(settings, port, heldout, policy, f"model after {trained} samples")
                )
                row = {"samples_trained": trained, "train_s": round(train_s, 1)}
                curve.append({**row, **success_table(played)})
                print(json.dumps(curve[-1]), flush=True)
            if not eval_at:
                break
            batch = [samples[rng.randrange(len(samples))] for _ in range(args.batch)]
            step_started = time.perf_counter()
            trainer.step(batch)
            train_s += time.perf_counter() - step_started
            trained += len(batch)
        parameters = sum(p.numel() for p in trainer.model.parameters())
    server.shutdown()
    first_heldout = miniwob.HELDOUT_SEED_BASE
    result = {
        "what": "tiny Qwen-VL policy, behaviour cloning on heuristic-teacher MiniWoB++ episodes",
        "tasks": list(PAGES),
        "train_instances": len(train_instances),
        "heldout_instances": len(heldout),
        "heldout_seeds": f"{first_heldout}..{first_heldout + args.heldout_seeds - 1}",
        "teacher_train_success": success_table(taught),
        "teacher_heldout_success": success_table(teacher_heldout),
        "samples": len(samples),
        "model_parameters": parameters,
        "context_tokens_median": statistics.median(context_tokens),
        "reply_tokens_median": statistics.median(reply_tokens),
        "seconds_per_sample": round(curve[-1]["train_s"] / max(curve[-1]["samples_trained"], 1), 4),
        "learning_rate": args.lr,
        "batch": args.batch,
        "curve": curve,
        "wall_clock_s": round(time.perf_counter() - started, 1),
    }
    write_result(args.out, result, produced_by=produced_by)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
