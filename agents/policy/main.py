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

from agents.policy.worker import BackendFactory, PolicyWorker, PolicyWorkerConfig
from infra.settings import Settings

BACKENDS = ("local", "openai", "vllm", "scripted", "heuristic")


@dataclass(frozen=True)
class BackendOptions:
    backend: str
    model: str = ""
    base_url: str | None = None
    max_new_tokens: int = 512
    device: str = "cpu"
    error_rate: float = 0.0  # scripted
    sites_count: int = 50  # scripted: the practice web whose tasks it knows
    sites_seed: int = 0


def backend_factory(options: BackendOptions) -> BackendFactory:
    """How to build the backend for the base model (None) or a published version's weights."""
    backend, model = options.backend, options.model
    base_url, max_new_tokens, device = options.base_url, options.max_new_tokens, options.device
    if backend == "scripted":
        from agents.policy.backends.scripted import ScriptedBackend
        from sites import generate_sites
        from sites.tasks import generate_tasks

        sites = generate_sites(seed=options.sites_seed, count=options.sites_count)
        tasks = {t["task_id"]: t for t in generate_tasks(sites, seed=options.sites_seed)}
        scripted = ScriptedBackend(tasks, options.error_rate, options.sites_seed)
        return lambda weights: scripted
    if backend == "heuristic":
        from agents.policy.backends.heuristic import HeuristicBackend

        heuristic = HeuristicBackend()
        return lambda weights: heuristic
    if not model:
        raise ValueError("--model is required: a checkpoint directory or a served model name")
    if backend == "vllm":
        from agents.policy.backends.vllm_inprocess import VLLMBackend

        engine = VLLMBackend(model, max_new_tokens=max_new_tokens)
        return engine.with_weights
    if backend == "local":
        from agents.policy.backends.local import LocalBackend

        def local(weights: Path | None) -> LocalBackend:
            adapter = weights if weights and (weights / "adapter_config.json").exists() else None
            checkpoint = Path(model) if weights is None or adapter else weights
            return LocalBackend(
                checkpoint, device=device, max_new_tokens=max_new_tokens, adapter=adapter
            )

        return local
    if backend == "openai":
        from agents.policy.backends.openai_http import OpenAIBackend

        if not base_url:
            raise ValueError("--backend openai needs --base-url (e.g. http://127.0.0.1:8000/v1)")

        def remote(weights: Path | None) -> OpenAIBackend:
            # The server owns its weights (vLLM reloads LoRA adapters itself); same client.
            return OpenAIBackend(base_url, model, max_tokens=max_new_tokens)

        return remote
    raise ValueError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")


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
    console.print(
        f"policy worker ({config.backend_name}, policy {config.policy_name}) in group "
        f"[bold]{config.group_id}[/] on {settings.bootstrap_servers}. Ctrl-C to stop."
    )
    worker.run(stop)
    console.print(f"stopped: {worker.stats}")
