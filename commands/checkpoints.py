"""Whether a ``--model`` names a checkpoint this machine has, asked before anything starts."""

from __future__ import annotations

from pathlib import Path


def checkpoint_exists(model: str) -> bool:
    """A checkpoint directory, or a model id whose config is in the local Hugging Face cache."""
    if Path(model).exists():
        return True
    from huggingface_hub import try_to_load_from_cache  # only for a model id

    try:
        return isinstance(try_to_load_from_cache(model, "config.json"), str)
    except ValueError:  # not even a valid model id
        return False
