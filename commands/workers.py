"""``webgym worker browser|policy``: consumer-group members that serve one topic family each."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from commands.errors import user_errors
from commands.options import ConsumerGroup
from infra.settings import SettingsError, load_settings
from infra.topic_admin import (
    require_partition_counts,
)

worker_app = typer.Typer(
    help="Workers: consumer-group members that serve one topic family.", no_args_is_help=True
)


@worker_app.command("browser")
@user_errors
def worker_browser(
    concurrency: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="actions (click, type, scroll...) served at once "
            "(default: WEBGYM_BROWSER_ACT_CONCURRENCY, 8)",
        ),
    ] = None,
    navigate_concurrency: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="navigations served at once (default: WEBGYM_BROWSER_NAVIGATE_CONCURRENCY, 4)",
        ),
    ] = None,
    group: ConsumerGroup = "webgym-browser",
    fault_injection: Annotated[
        bool,
        typer.Option(help="let tasks open chrome://crash and chrome://hang (chaos tests only)"),
    ] = False,
) -> None:
    """Serve browser operations (navigate, act) with Playwright and Chromium, emit observations.

    Joins the consumer group over webgym.ops.navigate, webgym.ops.act and webgym.episodes; start
    as many workers as you like, on any host: partitions (and so episodes) spread over them.
    Practice-web hosts (*.webgym.test) resolve to WEBGYM_PRACTICE_WEB_ADDRESS.
    """
    # Each worker imports only its own side: a policy worker never loads Playwright.
    from agents.browser.main import run_browser_worker
    from agents.browser.worker import BrowserWorkerConfig
    from infra.chromium import launch_options

    settings = load_settings()
    launch_options(settings)  # a missing Chromium is refused now, not at the first episode
    require_partition_counts(settings)  # contexts are held by partition
    config = BrowserWorkerConfig.from_settings(
        settings,
        act_concurrency=concurrency or settings.browser_act_concurrency,
        navigate_concurrency=navigate_concurrency or settings.browser_navigate_concurrency,
        group_id=group,
        client_id=f"{group}-{os.getpid()}",
        fault_injection=fault_injection,
    )
    run_browser_worker(settings, config)


@worker_app.command("policy")
@user_errors
def worker_policy(
    backend: Annotated[
        str,
        typer.Option(
            help="local (transformers), openai (HTTP), vllm (GPU), scripted (practice-web ground "
            "truth), heuristic (MiniWoB++ by the marks table) or latency-model (the rollout "
            "benchmark: scripted steps, each as slow as a VLM's inference)"
        ),
    ] = "local",
    model: Annotated[
        str,
        typer.Option(help="checkpoint directory or model id (local, vllm); served name (openai)"),
    ] = "",
    base_url: Annotated[
        str | None, typer.Option(help="OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1")
    ] = None,
    policy_name: Annotated[str, typer.Option(help="follow versions of this policy")] = "default",
    batch_size: Annotated[
        int | None,
        typer.Option(min=1, help="requests per backend call (default 8; latency-model: 1)"),
    ] = None,
    concurrency: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="backend calls in flight at once (default 1; latency-model: 64, or --sync-batch "
            "if larger)",
        ),
    ] = None,
    max_new_tokens: Annotated[int, typer.Option(min=1, help="reply length limit")] = 512,
    temperature: Annotated[
        float | None,
        typer.Option(
            min=0.0,
            help="local, vllm, openai: sampling temperature, 0 = greedy (default: "
            "WEBGYM_POLICY_TEMPERATURE, 0); recorded on every inference event",
        ),
    ] = None,
    top_p: Annotated[
        float | None,
        typer.Option(
            min=0.0,
            max=1.0,
            help="local, vllm, openai: nucleus sampling mass above temperature 0, 1 = no cut "
            "(default: WEBGYM_POLICY_TOP_P, 1); recorded on every inference event",
        ),
    ] = None,
    base_model: Annotated[
        str | None,
        typer.Option(
            help="local, vllm, openai: the base model published versions must be trained from "
            "(the learner's --model); versions of another base are refused (default: --model)",
        ),
    ] = None,
    device: Annotated[str, typer.Option(help="local backend device: cpu, cuda")] = "cpu",
    error_rate: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="scripted: share of steps that go wrong")
    ] = 0.0,
    sites_count: Annotated[
        int, typer.Option(help="scripted, latency-model: practice-web sites it knows")
    ] = 50,
    sites_seed: Annotated[int, typer.Option(help="scripted, latency-model: practice-web seed")] = 0,
    latency_median: Annotated[
        float,
        typer.Option(min=0.0, help="latency-model: median seconds of one inference (lognormal)"),
    ] = 1.5,
    latency_sigma: Annotated[
        float, typer.Option(min=0.0, help="latency-model: lognormal shape of the inference time")
    ] = 0.7,
    workload_seed: Annotated[
        int,
        typer.Option(
            help="latency-model: seed of latencies and episode lengths (same in both modes)"
        ),
    ] = 0,
    sync_batch: Annotated[
        int,
        typer.Option(
            min=0,
            help="latency-model: step lock-step batches of this many episodes (one run id each; "
            "run a single policy worker); 0 = asynchronous",
        ),
    ] = 0,
    infer_timeout: Annotated[
        float | None,
        typer.Option(
            help="seconds a backend call may take; past it each of its requests is answered with "
            "an error inference, the episode asks again within its parse-error budget, and the "
            "late reply is dropped (default: WEBGYM_POLICY_INFER_TIMEOUT_S, 90; keep it below "
            "the episode lease, WEBGYM_EPISODE_LEASE_S)"
        ),
    ] = None,
    group: ConsumerGroup = "webgym-policy",
) -> None:
    """Serve inference requests (webgym.ops.infer) with a model and emit inference events.

    Every reply is parsed strictly (Thought / Action / <tool_call> / Memory). New versions on
    webgym.policy.versions are fetched from MinIO, verified by sha256 and swapped in between
    batches (a failed swap is retried; the last good version keeps serving); versions trained
    from another base model are refused. Replies are greedy unless --temperature is above 0.
    Build a tiny test model with `webgym model tiny DIR`; `--backend scripted` solves
    practice-web tasks from their ground truth. `--backend latency-model` is the rollout
    benchmark's policy: scripted steps, each held for a lognormal VLM-like inference time, answering
    at a drawn step; `--sync-batch 32` steps batches of 32 episodes in lock-step. A backend call
    slower than `--infer-timeout` is answered with errors, and the orchestrator asks again.
    """
    from agents.policy.main import (
        BackendOptions,
        backend_factory,
        base_model_of,
        run_policy_worker,
        serving_shape,
    )
    from agents.policy.worker import PolicyWorkerConfig

    settings = load_settings()
    if infer_timeout is not None and infer_timeout <= 0:
        raise SettingsError(f"--infer-timeout must be more than 0 seconds, got {infer_timeout:g}")
    options = BackendOptions(
        backend=backend,
        model=model,
        base_url=base_url,
        max_new_tokens=max_new_tokens,
        device=device,
        error_rate=error_rate,
        sites_count=sites_count,
        sites_seed=sites_seed,
        temperature=settings.policy_temperature if temperature is None else temperature,
        top_p=settings.policy_top_p if top_p is None else top_p,
        base_model=base_model or "",
        latency_median_s=latency_median,
        latency_sigma=latency_sigma,
        workload_seed=workload_seed,
        horizons=dict(settings.horizons),  # episodes must answer before the orchestrator's horizon
        sync_batch=sync_batch,
    )
    try:
        batch_size, concurrency = serving_shape(options, batch_size, concurrency)
        factory = backend_factory(options)
    except ValueError as exc:
        raise SettingsError(str(exc)) from exc
    require_partition_counts(settings)  # per-episode state is held by partition; after the options
    config = PolicyWorkerConfig(
        backend_name=backend,
        policy_name=policy_name,
        group_id=group,
        client_id=f"{group}-{os.getpid()}",
        batch_size=batch_size,
        concurrency=concurrency,
        infer_timeout_s=infer_timeout,
        base_model=base_model_of(options),
    )
    run_policy_worker(settings, config, factory)
