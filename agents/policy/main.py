"""`webgym worker policy`: one policy worker until SIGINT or SIGTERM.

Reads like a recipe: settings, backend factory, worker config, serve.
"""

from __future__ import annotations

import logging
import signal
import threading
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from agents.policy.backend_call import BackendFactory
from agents.policy.backends import Sampling
from agents.policy.backends.heuristic import HeuristicBackend
from agents.policy.backends.latency_model import LatencyModelBackend
from agents.policy.backends.scripted import ScriptedBackend
from agents.policy.worker import PolicyWorker, PolicyWorkerConfig
from agents.policy.workload import WorkloadSpec
from infra.settings import Settings
from infra.weights import WeightsRejected
from sites import generate_sites
from sites.tasks import generate_tasks

BACKENDS = ("local", "openai", "vllm", "scripted", "heuristic", "latency-model")
# latency-model: one request per backend call, so one slow draw never delays another episode's
# reply, and enough calls in flight for the benchmark's 32 episodes (or a lock-step batch).
LATENCY_MODEL_CONCURRENCY = 64


@dataclass(frozen=True)
class BackendOptions:
    backend: str
    model: str = ""
    base_url: str | None = None
    max_new_tokens: int = 512
    device: str = "cpu"
    error_rate: float = 0.0  # scripted
    sites_count: int = 50  # scripted, latency-model: the practice web whose tasks it knows
    sites_seed: int = 0
    latency_median_s: float = 1.5  # latency-model: the workload (agents.policy.workload)
    latency_sigma: float = 0.7
    workload_seed: int = 0
    horizons: dict[str, int] | None = None  # None: the workload's (easy 10, medium 20, hard 30)
    sync_batch: int = 0  # latency-model: lock-step batches of this many episodes; 0 = async
    sync_timeout_s: float = 60.0
    temperature: float = 0.0  # model backends: 0 = greedy
    top_p: float = 1.0  # model backends: nucleus sampling mass, 1 = no cut
    base_model: str = ""  # model backends: what versions must be trained from; "" = `model`


def base_model_of(options: BackendOptions) -> str | None:
    """The base model a worker with these options serves (None: a backend without weights)."""
    if options.backend in ("scripted", "latency-model", "heuristic"):
        return None
    return options.base_model or options.model


def backend_factory(options: BackendOptions) -> BackendFactory:
    """How to build the backend for the base model (None) or a published version's weights."""
    backend, model = options.backend, options.model
    base_url, max_new_tokens, device = options.base_url, options.max_new_tokens, options.device
    if backend == "scripted":
        scripted = ScriptedBackend(_practice_tasks(options), options.error_rate, options.sites_seed)
        return lambda weights: scripted
    if backend == "latency-model":
        spec = WorkloadSpec(
            seed=options.workload_seed,
            median_s=options.latency_median_s,
            sigma=options.latency_sigma,
            **({"horizons": dict(options.horizons)} if options.horizons else {}),
        )
        # One instance for every version: the lock-step barrier must outlive a weights swap.
        timed = LatencyModelBackend(
            _practice_tasks(options), spec, options.sync_batch, options.sync_timeout_s
        )
        return lambda weights: timed
    if backend == "heuristic":
        heuristic = HeuristicBackend()
        return lambda weights: heuristic
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    if not model:
        raise ValueError("--model is required: a checkpoint directory or a served model name")
    sampling = {"temperature": options.temperature, "top_p": options.top_p}
    Sampling(**sampling)  # out-of-range values are refused now, before a model loads
    if backend == "vllm":
        # vllm: installed on a GPU machine only (the gpu extra)
        from agents.policy.backends.vllm_inprocess import VLLMBackend

        # Every version's backend shares this one engine; any of them can swap in the next.
        engine = VLLMBackend(model, max_new_tokens=max_new_tokens, **sampling)
        return engine.with_weights
    if backend == "local":
        # torch and transformers: seconds to import, for this backend only
        from agents.policy.backends.local import LocalBackend

        def local(weights: Path | None) -> LocalBackend:
            adapter = weights if weights and (weights / "adapter_config.json").exists() else None
            checkpoint = Path(model) if weights is None or adapter else weights
            return LocalBackend(
                checkpoint,
                device=device,
                max_new_tokens=max_new_tokens,
                adapter=adapter,
                **sampling,
            )

        return local
    if backend == "openai":
        # openai: a second or more to import, for this backend only
        from agents.policy.backends.openai_http import LoraAdapters, OpenAIBackend
        from infra.openai_client import ChatEndpoint  # the same import

        if not base_url:
            raise ValueError("--backend openai needs --base-url (e.g. http://127.0.0.1:8000/v1)")
        endpoint = ChatEndpoint(base_url, model, max_tokens=max_new_tokens)
        base = OpenAIBackend(endpoint, Sampling(**sampling))
        adapters = LoraAdapters(base_url)

        def remote(weights: Path | None) -> OpenAIBackend:
            if weights is None:
                return base
            if not (weights / "adapter_config.json").exists():
                raise WeightsRejected(
                    f"{weights.name} holds full weights; a server cannot load them at run time: "
                    f"restart `vllm serve {weights}`, or serve it with --backend vllm or local"
                )
            return base.serving(adapters.load(weights))  # the server loads it; we name it

        return remote
    raise ValueError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")


def _practice_tasks(options: BackendOptions) -> dict[str, dict]:
    sites = generate_sites(seed=options.sites_seed, count=options.sites_count)
    return {t["task_id"]: t for t in generate_tasks(sites, seed=options.sites_seed)}


def serving_shape(
    options: BackendOptions, batch_size: int | None, concurrency: int | None
) -> tuple[int, int]:
    """(batch size, batches in flight) for the worker: the defaults, or the user's, checked.

    Defaults: 8 requests per call and one call at a time; for latency-model, 1 and
    ``max(64, sync_batch)``.
    """
    if options.backend != "latency-model":
        return batch_size or 8, concurrency or 1
    batch_size = batch_size or 1
    concurrency = concurrency or max(LATENCY_MODEL_CONCURRENCY, options.sync_batch)
    if batch_size != 1 and not options.sync_batch:
        raise ValueError(
            "--backend latency-model emits a batch's replies together, so a slow draw would "
            "delay other episodes: use --batch-size 1 (the default for this backend)"
        )
    if concurrency < options.sync_batch:
        raise ValueError(
            f"--sync-batch {options.sync_batch} holds that many requests at once, each in one of "
            f"the worker's {concurrency} serving threads: raise --concurrency to at least "
            f"{options.sync_batch} (or leave it out)"
        )
    return batch_size, concurrency


def run_policy_worker(
    settings: Settings, config: PolicyWorkerConfig, factory: BackendFactory
) -> None:
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    console = Console()
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    worker = PolicyWorker(settings, config, factory)
    following = (
        f"versions of {config.policy_name} trained from {config.base_model}"
        if worker.serving.version is not None
        else "no versions (this backend uses no weights)"
    )
    console.print(
        f"policy worker ({config.backend_name}) in group [bold]{config.group_id}[/] on "
        f"{settings.bootstrap_servers}, serving {following}; backend calls limited to "
        f"{worker.infer_timeout_s:g} s. Ctrl-C to stop."
    )
    if worker.infer_timeout_s >= settings.episode_lease_s:
        console.print(
            f"[yellow]--infer-timeout {worker.infer_timeout_s:g} s is not below the episode lease "
            f"({settings.episode_lease_s:g} s): a slow call aborts its episode before it can be "
            "asked again. Lower --infer-timeout or raise WEBGYM_EPISODE_LEASE_S.[/]"
        )
    worker.run(stop)
    console.print(f"stopped: {worker.status()}")
