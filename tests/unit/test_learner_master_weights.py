"""Full fine-tuning in bf16 keeps float32 master weights: at a learning rate of 1e-5 the updates
are far below a bf16 weight's resolution, so AdamW on the bf16 weights alone rounds most of them
away (shown here, as the naive path), while the trainer's weights keep moving."""

from __future__ import annotations

import pytest
import torch

from agents.policy.tiny_model import build_tiny_vl_model
from learner.objective import reply_loss
from learner.samples import Sample
from learner.trainer import MasterWeights, Trainer, TrainerConfig
from schemas.prompt.reply import format_reply

STEPS = 4


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return build_tiny_vl_model(tmp_path_factory.mktemp("models") / "tiny")


def _sample() -> Sample:
    reply = format_reply({"kind": "answer", "text": "$3"}, "It says $3.", "answer", "done")
    return Sample("ep", 1, 0, [{"role": "user", "content": "Find the price."}], reply)


def _moved(model: torch.nn.Module, before: list[torch.Tensor]) -> float:
    """The share of weights that differ from ``before``."""
    changed = sum(int((p != b).sum()) for p, b in zip(model.parameters(), before, strict=True))
    return changed / sum(b.numel() for b in before)


def test_a_constant_update_below_bf16_resolution_accumulates_in_the_masters():
    weight = torch.nn.Parameter(torch.full((64,), 0.1, dtype=torch.bfloat16))
    naive = torch.nn.Parameter(weight.detach().clone())
    masters = MasterWeights([weight])
    optimisers = [torch.optim.AdamW(params, lr=1e-5) for params in (masters.optimised, [naive])]
    for _ in range(40):  # 40 steps of ~1e-5 each; bf16's spacing near 0.1 is ~4.9e-4
        for optimiser in optimisers:
            optimiser.zero_grad()
        weight.grad = torch.ones_like(weight)
        masters.accumulate_gradients()
        naive.grad = torch.ones_like(naive)
        for optimiser in optimisers:
            optimiser.step()
        masters.copy_to_model()
    assert torch.equal(naive, torch.full_like(naive, 0.1))  # every update rounded away
    assert float(masters.optimised[0][0].detach()) == pytest.approx(0.1 - 40e-5, rel=1e-3)
    assert float(weight[0].detach()) < 0.1  # the bf16 weight is the master, rounded


def test_bf16_full_fine_tuning_at_lr_1e_5_moves_the_weights(tiny):
    config = TrainerConfig(model=str(tiny), lora_rank=0, learning_rate=1e-5, dtype="bfloat16")
    sample = _sample()

    trainer = Trainer(config)
    assert trainer.masters.pairs  # bf16 weights get float32 masters
    before = [p.detach().clone() for p in trainer.model.parameters()]
    for _ in range(STEPS):
        trainer.step([sample])
    with_masters = _moved(trainer.model, before)
    for parameter, master in trainer.masters.pairs:
        assert parameter.dtype == torch.bfloat16
        assert torch.equal(parameter, master.to(torch.bfloat16))

    # The naive path: AdamW on the bf16 weights themselves.
    naive = Trainer(config).model
    optimiser = torch.optim.AdamW(list(naive.parameters()), lr=1e-5)
    for _ in range(STEPS):
        optimiser.zero_grad()
        reply_loss(naive, trainer.processor, sample).backward()
        optimiser.step()
    without = _moved(naive, before)
    # Only weights close to 0 can move by 1e-5 in bf16 (~7% of the tiny model's), and they are
    # the same ones every step; with masters, every step adds more that have moved.
    assert with_masters > 2.5 * without, (with_masters, without)

    resumed = Trainer(config, optimizer_state=trainer.optimizer_state())
    for (_, saved), (parameter, master) in zip(
        trainer.masters.pairs, resumed.masters.pairs, strict=True
    ):
        assert torch.equal(master, saved)  # the masters travel with the optimiser state
        assert torch.equal(parameter, saved.to(torch.bfloat16))
