"""Benchmark: the online learner on a real run's successes, LoRA and full fine-tuning.

Under a fresh topic prefix and policies bucket (deleted afterwards) it runs the scripted policy
without errors through the whole loop (so every episode is a success), then runs the learner
in-process over the success stream until it is idle, once per mode, each from the base model:

- samples per second: samples through the optimiser (new + replayed) / seconds in optimiser
  steps (forward, backward, step; reading samples from the log is not counted);
- publish time: save + optimiser state + upload + manifest + version event + offset commit, per
  version, and the bytes published;
- the mean reply loss on all success samples before and after.

Writes bench/results/learner.json. Run: `.venv/bin/python -m bench.learner` (after `webgym up`);
``--device cuda --model DIR`` on a GPU machine for the same figures on a real checkpoint.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
import uuid
from pathlib import Path

import torch

from agents.policy.tiny_model import build_tiny_vl_model
from commands.local_run import RunOptions, run_local
from infra.log_reader import read_topic
from infra.minio_store import build_minio, ensure_buckets, remove_bucket
from infra.provenance import write_result
from infra.settings import Settings
from infra.topic_admin import create_topics, delete_topics
from infra.weights import fetch_weights, latest_announced
from learner.loop import Learner, LearnerConfig
from learner.samples import SampleBuilder
from learner.trainer import Trainer, TrainerConfig

RESULTS = Path(__file__).parent / "results" / "learner.json"


def _samples(settings: Settings) -> list:
    builder = SampleBuilder(settings)
    try:
        records = [e.record for e in read_topic(settings, "trajectories.success")]
        return [s for record in records for s in builder.build(record).samples]
    finally:
        builder.close()


def _mode(settings: Settings, model: str, lora_rank: int, device: str, samples: list) -> dict:
    name = f"bench-{'lora' if lora_rank else 'full'}"
    config = LearnerConfig(
        policy_name=name,
        group_id=f"bench-learner-{name}-{uuid.uuid4().hex[:6]}",
        fresh_per_step=8,
        replay_per_step=8,
        publish_every=2,
        idle_s=3.0,
        exit_when_idle=True,
    )
    trainer_config = TrainerConfig(
        model=model, lora_rank=lora_rank, learning_rate=5e-3 if lora_rank else 1e-3, device=device
    )
    base_loss = Trainer(trainer_config).loss(samples)
    learner = Learner(settings, config, trainer_config)
    started = time.perf_counter()
    try:
        learner.run(threading.Event())
    finally:
        learner.close()
    wall = time.perf_counter() - started
    stats = learner.stats
    latest = latest_announced(settings, name)
    with tempfile.TemporaryDirectory() as scratch:
        weights = fetch_weights(build_minio(settings), latest, Path(scratch))
        trained_loss = Trainer(trainer_config, weights).loss(samples)
    publish_s = [seconds for _, seconds, _ in stats["published"]]
    return {
        "mode": f"LoRA rank {lora_rank}" if lora_rank else "full fine-tuning",
        "trainable_parameters": learner.trainer.trainable_parameters(),
        "optimizer_steps": stats["optimizer_steps"],
        "samples_through_optimizer": stats["samples_trained"],
        "optimizer_seconds": round(stats["train_s"], 2),
        "samples_per_s": round(stats["samples_trained"] / stats["train_s"], 2),
        "versions_published": len(publish_s),
        "publish_s_p50": round(statistics.median(publish_s), 3),
        "publish_s_max": round(max(publish_s), 3),
        "bytes_per_version": stats["published"][-1][2],
        "learner_wall_s": round(wall, 1),
        "loss_before": round(base_loss, 4),
        "loss_after": round(trained_loss, 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=24)
    parser.add_argument("--model", help="base checkpoint (default: a fresh tiny Qwen-VL)")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    base = Settings()
    prefix = f"bench-{uuid.uuid4().hex[:8]}"
    settings = base.model_copy(
        update={
            "topic_prefix": prefix,
            "practice_web_address": "127.0.0.1:0",
            "policies_bucket": f"{prefix}-policies",
        }
    )
    create_topics(settings)
    minio = build_minio(settings)
    ensure_buckets(minio, settings)
    try:
        with tempfile.TemporaryDirectory() as scratch:
            model = args.model or str(build_tiny_vl_model(Path(scratch) / "tiny"))
            run_local(
                settings,
                RunOptions(episodes=args.episodes, in_flight=4, error_rate=0.0, sites=5),
                start_stack=False,
            )
            samples = _samples(settings)
            modes = [_mode(settings, model, rank, args.device, samples) for rank in (16, 0)]
        result = {
            "benchmark": "learner",
            "torch_threads": torch.get_num_threads(),  # the machine is in the provenance
            "device": args.device,
            "model": args.model or "tiny random Qwen3-VL (build_tiny_vl_model)",
            "episodes": args.episodes,
            "success_samples": len(samples),
            "schedule": "8 new + 8 replayed samples per optimiser step, publish every 2 steps",
            "modes": modes,
        }
        write_result(RESULTS, result)
        print(json.dumps(result, indent=2))
    finally:
        delete_topics(settings)
        remove_bucket(minio, settings.policies_bucket)


if __name__ == "__main__":
    main()
