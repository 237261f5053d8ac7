"""Training samples read back from the log: the exact context each trainable step saw (its
inference request, images resolved to the observations' screenshots) and the reply it gave."""

from __future__ import annotations

import json
import uuid

from commands.local_run import RunOptions, run_local
from infra.log_reader import read_topic
from tests.e2e.conftest import image_parts, training_samples


def _by_id(settings, suffix):
    events = {}
    for event in read_topic(settings, suffix):
        events.setdefault(event.record["event_id"], event.record)
    return events


def test_samples_are_exactly_what_the_policy_saw_and_said(run_settings):
    options = RunOptions(
        episodes=6, in_flight=3, error_rate=0.0, sites=3, run_id=f"e2e-s{uuid.uuid4().hex[:6]}"
    )
    run_local(run_settings, options, start_stack=False)
    # The scripted policy without errors solves every task.
    successes, samples = training_samples(run_settings, 6)
    requests = _by_id(run_settings, "ops.infer")
    inferences = _by_id(run_settings, "inferences")
    observations = _by_id(run_settings, "observations")
    trainable = sum(1 for r in successes for s in r["steps"] if s["trainable"])
    assert len(samples) == trainable > 0

    for sample in samples:
        request = requests[f"{sample.episode_id}:{sample.step}:infer"]
        expected = json.loads(request["messages_json"])
        images = image_parts(sample)
        assert [observations[i]["screenshot"] for i in request["observation_event_ids"]] == [
            part["image"] for part in images
        ]
        for part in images:
            part.pop("image")
        stripped = [
            {
                **m,
                "content": [
                    {k: v for k, v in p.items() if k != "observation_event_id"}
                    for p in m["content"]
                ],
            }
            if isinstance(m["content"], list)
            else m
            for m in expected
        ]
        assert sample.messages == stripped
        assert (
            sample.reply == inferences[f"{sample.episode_id}:{sample.step}:inference"]["raw_text"]
        )
