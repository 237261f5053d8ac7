"""``webgym learner`` (the online learner) and ``webgym model tiny`` (a test checkpoint)."""

from __future__ import annotations

import logging
import signal
import threading
from pathlib import Path
from typing import Annotated

import typer

from commands.checkpoints import checkpoint_exists
from commands.errors import console, user_errors
from commands.options import FreshPerStep, PublishEvery, ReplayPerStep
from infra.niceness import yield_cpu
from infra.settings import SettingsError, load_settings

model_app = typer.Typer(help="Model checkpoints.", no_args_is_help=True)

CPU_LEARNER_NICE = 19


def learner_niceness(setting: int | None, device: str) -> int:
    """The learner's niceness: ``WEBGYM_LEARNER_NICE`` when set; else :data:`CPU_LEARNER_NICE`
    when it trains on a CPU, where its steps would take the cores the rollouts need, and 0 on a
    GPU, whose feeding threads should not wait."""
    if setting is not None:
        return setting
    return 0 if device.startswith("cuda") else CPU_LEARNER_NICE


@user_errors
def learner(
    model: Annotated[
        str, typer.Option(help="base checkpoint: a directory, or a model id in the local HF cache")
    ],
    policy_name: Annotated[str, typer.Option(help="publish versions of this policy")] = "default",
    lora_rank: Annotated[
        int,
        typer.Option(min=0, help="LoRA rank on the attention projections; 0 = full fine-tuning"),
    ] = 16,
    lora_alpha: Annotated[int, typer.Option(min=1, help="LoRA scaling numerator")] = 32,
    lr: Annotated[float, typer.Option(min=0.0, help="AdamW learning rate")] = 1e-4,
    fresh_per_step: FreshPerStep = 8,
    replay_per_step: ReplayPerStep = 8,
    publish_every: PublishEvery = 4,
    window: Annotated[int, typer.Option(min=1, help="samples kept for replay")] = 256,
    half_life: Annotated[
        float, typer.Option(min=0.001, help="recency half-life of replay draws, in samples")
    ] = 64.0,
    max_staleness: Annotated[
        int, typer.Option(min=0, help="drop samples from policies more versions behind than this")
    ] = 4,
    keep_versions: Annotated[
        int, typer.Option(min=1, help="versions kept in MinIO for rollback")
    ] = 5,
    idle_s: Annotated[
        float, typer.Option(min=0.0, help="input quiet this long: train what is pending, publish")
    ] = 30.0,
    exit_when_idle: Annotated[
        bool, typer.Option(help="exit once input is idle and everything is published")
    ] = False,
    device: Annotated[str, typer.Option(help="cpu, cuda or cuda:N (bf16 on GPUs)")] = "cpu",
    gradient_checkpointing: Annotated[
        bool, typer.Option(help="trade compute for memory (large models on one GPU)")
    ] = False,
    group: Annotated[str, typer.Option(help="consumer group on the success stream")] = (
        "webgym-learner"
    ),
    seed: Annotated[int, typer.Option(help="seed of the replay draws")] = 0,
    tensorboard: Annotated[
        Path | None,
        typer.Option(help="write the loss per optimiser step as TensorBoard event files here"),
    ] = None,
    runs: Annotated[
        str,
        typer.Option(
            help="train only on successes of these runs (run ids, comma-separated); other runs' "
            "successes are read and skipped (default: every run)"
        ),
    ] = "",
) -> None:
    """Train the policy on webgym.trajectories.success and publish versions while rollouts run.

    Filtered behaviour cloning: cross-entropy on the reply tokens of successful steps, exactly as
    the policy saw and said them. Every --publish-every optimiser steps it writes the weights and
    a manifest to MinIO (policies/<name>/v<N>/), announces them on webgym.policy.versions, and
    only then commits its offsets; killed at any point, it resumes from the last announced
    version. Ctrl-C publishes what is trained, then stops. On a CPU every thread of it runs at
    niceness 19 (WEBGYM_LEARNER_NICE), so the rollouts beside it never wait on its steps.
    """

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    settings = load_settings()
    if not checkpoint_exists(model):
        raise SettingsError(
            f"--model {model}: no such checkpoint directory (nor a model id in the local Hugging "
            "Face cache); build a small one with `webgym model tiny DIR`"
        )
    nice = learner_niceness(settings.learner_nice, device)
    yield_cpu(nice)  # before PyTorch loads: every thread it starts inherits it
    from learner.loop import Learner, LearnerConfig, LearnerError  # PyTorch: once the model exists
    from learner.trainer import TrainerConfig

    config = LearnerConfig(
        policy_name=policy_name,
        group_id=group,
        fresh_per_step=fresh_per_step,
        replay_per_step=replay_per_step,
        publish_every=publish_every,
        window=window,
        recency_half_life=half_life,
        max_staleness=max_staleness,
        keep_versions=keep_versions,
        idle_s=idle_s,
        exit_when_idle=exit_when_idle,
        seed=seed,
        tensorboard=str(tensorboard) if tensorboard else None,
        runs=tuple(r.strip() for r in runs.split(",") if r.strip()),
    )
    trainer_config = TrainerConfig(
        model=model,
        lora_rank=lora_rank,
        lora_alpha=lora_alpha,
        learning_rate=lr,
        device=device,
        gradient_checkpointing=gradient_checkpointing,
    )
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        worker = Learner(settings, config, trainer_config)
    except (LearnerError, OSError, ValueError) as exc:
        raise SettingsError(f"cannot start the learner: {exc}") from exc
    console.print(
        f"learner for policy [bold]{policy_name}[/] from {model} "
        f"({'LoRA rank ' + str(lora_rank) if lora_rank else 'full fine-tuning'}, {device}, "
        f"niceness {nice}) "
        f"on {settings.topic('trajectories.success')}. Ctrl-C to stop."
    )
    try:
        worker.run(stop)
    except LearnerError as exc:
        raise SettingsError(str(exc)) from exc
    finally:
        worker.close()
    console.print(
        f"stopped: {worker.stats['optimizer_steps']} optimiser steps, "
        f"{worker.stats['samples_trained']} samples trained, "
        f"published {[f'v{v}' for v, _, _ in worker.stats['published']]}"
    )


@model_app.command("tiny")
@user_errors
def model_tiny(
    out: Annotated[Path, typer.Argument(help="directory to write the checkpoint to")],
    seed: Annotated[int, typer.Option(help="weights and tokenizer seed")] = 0,
) -> None:
    """Build a tiny randomly initialised Qwen-VL checkpoint offline (for tests and smoke runs)."""

    if out.exists() and not out.is_dir():
        raise SettingsError(f"{out} is a file, not a directory; give a directory to write to")
    from agents.policy.tiny_model import build_tiny_vl_model  # transformers: only to build

    path = build_tiny_vl_model(out, seed=seed)
    console.print(f"tiny Qwen-VL checkpoint written to {path}")
