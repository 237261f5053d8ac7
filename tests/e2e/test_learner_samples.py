"""Training samples read back from the log: the exact context each trainable step saw (its
inference request, images resolved to the observations' screenshots) and the reply it gave."""

from __future__ import annotations

import json
import uuid

from commands.local_run import RunOptions, run_local
from infra.log_reader import read_topic
from learner.samples import SampleBuilder


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
    successes = [e.record for e in read_topic(run_settings, "trajectories.success")]
    assert len(successes) == 6  # the scripted policy without errors solves every task
    requests = _by_id(run_settings, "ops.infer")
    inferences = _by_id(run_settings, "inferences")
    observations = _by_id(run_settings, "observations")

    builder = SampleBuilder(run_settings)
    try:
        built = [builder.build(record) for record in successes]
    finally:
        builder.close()
    assert all(not b.unavailable for b in built)
    samples = [s for b in built for s in b.samples]
    trainable = sum(1 for r in successes for s in r["steps"] if s["trainable"])
    assert len(samples) == trainable > 0

    for sample in samples:
        request = requests[f"{sample.episode_id}:{sample.step}:infer"]
        expected = json.loads(request["messages_json"])
        images = [
            part
            for message in sample.messages
            if isinstance(message["content"], list)
            for part in message["content"]
            if part["type"] == "image"
        ]
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
