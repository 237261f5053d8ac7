"""The online learner on the real stack: successes in, verified versions out, hot reload, resume.

Scripted successes -> the learner trains the tiny Qwen-VL model -> v1 in MinIO with a valid
manifest -> a ``webgym.policy.versions`` event -> a policy worker on the model swaps the newest
version in (the scripted worker uses no weights: its inferences name no version); training
lowers the loss on the success samples. And a learner killed at
each point of its cycle never announces partial weights and, across restarts, trains every sample
exactly once (the kill in the middle of an upload, with rollouts running beside it, is the chaos
tier's tests/chaos/test_learner_kill.py).
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter

from confluent_kafka import TopicPartition

from agents.policy.main import BackendOptions, backend_factory
from agents.policy.worker import PolicyWorker, PolicyWorkerConfig
from commands.children import Child, settings_env
from commands.local_run import run_local
from infra.consumer import build_consumer
from infra.log_reader import read_topic
from infra.minio_store import build_minio, read_bytes
from infra.weights import (
    MANIFEST,
    fetch_weights,
    read_manifest,
    stored_versions,
    version_prefix,
)
from learner.samples import SampleBuilder
from learner.trainer import Trainer, TrainerConfig
from tests.e2e.conftest import run_options
from tests.integration.model_servers import tiny_model_fixture  # noqa: F401

CLI = [sys.executable, "-m", "commands.main"]


def _versions(settings, name="default"):
    events = [e.record for e in read_topic(settings, "policy.versions")]
    return [e for e in events if e["policy_name"] == name]


def _success_samples(settings):
    successes = [e.record for e in read_topic(settings, "trajectories.success")]
    builder = SampleBuilder(settings)
    try:
        samples = [s for record in successes for s in builder.build(record).samples]
    finally:
        builder.close()
    return successes, samples


def _check_manifest(settings, event, model):
    """The stored version is complete, verified and says where its inputs came from."""
    minio = build_minio(settings)
    bucket = settings.policies_bucket
    prefix = version_prefix(event["policy_name"], event["policy_version"])
    manifest_bytes = read_bytes(minio, bucket, prefix + MANIFEST)
    assert hashlib.sha256(manifest_bytes).hexdigest() == event["manifest_sha256"]
    manifest = read_manifest(minio, settings, event["policy_name"], event["policy_version"])
    assert manifest.version == event["policy_version"] and manifest.base_model == model
    assert {"adapter_config.json", "adapter_model.safetensors"} <= set(manifest.files)
    for relative, sha in manifest.files.items():
        assert hashlib.sha256(read_bytes(minio, bucket, prefix + relative)).hexdigest() == sha
    topic = settings.topic("trajectories.success")
    assert manifest.input_offsets and all(k.startswith(f"{topic}:") for k in manifest.input_offsets)
    assert manifest.samples_seen == event["samples_seen"] > 0
    return manifest


def test_successes_train_a_version_that_the_policy_worker_serves(run_settings, tiny_model):
    options = run_options(
        "e2e-l", episodes=20, in_flight=2, error_rate=0.0, sites=3,
        learner_model=str(tiny_model),
        learner_args=(
            "--lora-rank", "8", "--lr", "5e-3", "--fresh-per-step", "2",
            "--replay-per-step", "2", "--publish-every", "1", "--idle-s", "5",
            # v1's manifest is read below: keep every version (the default keeps 5, and a run
            # that publishes a sixth deletes v1).
            "--keep-versions", "1000",
        ),
    )  # fmt: skip
    run_local(run_settings, options, start_stack=False)
    versions = _versions(run_settings)
    assert versions and versions[0]["policy_version"] == 1
    assert [v["policy_version"] for v in versions] == list(range(1, len(versions) + 1))
    first = versions[0]
    _check_manifest(run_settings, first, str(tiny_model))

    # The scripted policy uses no weights: no inference of it names a version, before or after
    # the learner published.
    inferences = [e.record for e in read_topic(run_settings, "inferences")]
    assert inferences and all(r["policy_version"] is None for r in inferences)
    # A policy worker on the model follows the versions and serves the newest one.
    newest = versions[-1]["policy_version"]
    factory = backend_factory(BackendOptions("local", model=str(tiny_model), max_new_tokens=2))
    config = PolicyWorkerConfig(
        backend_name="local", client_id=f"follow-{uuid.uuid4().hex[:6]}", base_model=str(tiny_model)
    )
    worker = PolicyWorker(run_settings, config, factory)
    stop = threading.Event()
    follower = threading.Thread(target=worker._follow_versions, args=(stop,), daemon=True)
    follower.start()
    deadline = time.monotonic() + 120
    while worker.serving.version != newest:
        assert time.monotonic() < deadline, f"v{newest} was never served: {worker.status()}"
        time.sleep(0.2)
    stop.set()
    follower.join(10)
    assert worker.status()["swap_failures"] == 0

    # Training lowered the loss on the success samples: a published version's loss is below the
    # base model's. Not necessarily the newest's: in one CI run the sixth and last version scored
    # 9.11 against the base's 9.00 while the training batches' losses had fallen from 8.99 to
    # 8.65; at this learning rate an Adam step now and then overshoots (8.71 -> 9.06 at another
    # run's step 6, back to 8.71 the step after), and a run can end right after one.
    _, samples = _success_samples(run_settings)
    config = TrainerConfig(model=str(tiny_model), lora_rank=8)
    base_loss = Trainer(config).loss(samples)  # a fresh adapter is the identity
    minio, cache = build_minio(run_settings), run_settings.cache_dir / "test"
    losses = {}
    for version in reversed(versions):  # newest first; usually the first one tried is lower
        weights = fetch_weights(minio, version, cache)
        losses[version["policy_version"]] = Trainer(config, weights).loss(samples)
        if losses[version["policy_version"]] < base_loss:
            break
    assert min(losses.values()) < base_loss, (base_loss, losses)


def _learner(settings, model, log_dir, name, hold=None, extra=()):
    env = settings_env(settings)
    env.pop("WEBGYM_LEARNER_HOLD_AT", None)
    if hold:
        env["WEBGYM_LEARNER_HOLD_AT"] = hold
    argv = [
        *CLI, "learner", "--model", str(model), "--lora-rank", "4", "--lr", "1e-3",
        "--fresh-per-step", "3", "--replay-per-step", "1", "--publish-every", "2",
        "--keep-versions", "100", "--idle-s", "3", "--exit-when-idle", *extra,
    ]  # fmt: skip
    return Child.start(name, argv, env, log_dir)


def _committed(settings, group="webgym-learner"):
    topic = settings.topic("trajectories.success")
    consumer = build_consumer(settings, group, "test-committed")
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        committed = consumer.committed([TopicPartition(topic, p) for p in partitions], timeout=10)
        return {tp.partition: tp.offset for tp in committed if tp.offset >= 0}
    finally:
        consumer.close()


def test_a_killed_learner_never_announces_partial_weights_nor_trains_a_sample_twice(
    run_settings, tiny_model, tmp_path
):
    options = run_options("e2e-k", episodes=8, in_flight=4, error_rate=0.0, sites=3)
    run_local(run_settings, options, start_stack=False)
    successes, samples = _success_samples(run_settings)
    assert len(successes) == 8 and len(samples) >= 12  # enough for several versions
    minio = build_minio(run_settings)
    name = "default"

    # 1. Killed after an optimiser step, before any upload: nothing stored, nothing announced.
    learner = _learner(run_settings, tiny_model, tmp_path, "learner-1", hold="after-step")
    learner.wait_for("holding at after-step", 180)
    learner.kill()
    assert stored_versions(minio, run_settings, name) == [] and _versions(run_settings) == []

    assert _committed(run_settings) == {}
    # (Killed in the middle of uploading v1 -- files stored, no manifest, no event, no offset
    # committed, the leftover deleted by the next learner -- is tests/chaos/test_learner_kill.py,
    # with rollouts running beside it.)

    # 2. Killed after announcing v1, before committing: v1 is complete and announced, the
    #    offsets are not committed yet.
    learner = _learner(run_settings, tiny_model, tmp_path, "learner-2", hold="after-announce")
    learner.wait_for("holding at after-announce", 180)
    learner.kill()
    [v1] = _versions(run_settings)
    _check_manifest(run_settings, v1, str(tiny_model))
    assert _committed(run_settings) == {}

    # 3. Runs to the end: resumes from v1's manifest offsets, publishes the rest, exits idle.
    learner = _learner(run_settings, tiny_model, tmp_path, "learner-3")
    assert learner.process.wait(timeout=300) == 0, learner.text()[-3000:]
    # Its window was rebuilt from the log: every entry v1 recorded is back.
    v1_window = read_manifest(minio, run_settings, name, 1).training["window"]
    assert v1_window and "resumed default from v1 " in learner.text()
    assert f"window {len(v1_window)}, offsets" in learner.text()

    versions = _versions(run_settings)
    numbers = [v["policy_version"] for v in versions]
    assert numbers == list(range(1, len(numbers) + 1)) and len(numbers) >= 2
    manifests = [_check_manifest(run_settings, v, str(tiny_model)) for v in versions]
    assert [m.parent_version for m in manifests] == [None, *numbers[:-1]]
    trained = [key for m in manifests for key in m.training["trained_samples"]]
    dropped = [key for m in manifests for key in m.training["dropped_samples"]]
    assert dropped == []  # nothing is stale in one run of v0 rollouts
    counts = Counter(trained)
    assert all(n == 1 for n in counts.values()), counts.most_common(3)  # never twice
    assert set(counts) == {f"{s.episode_id}:{s.step}" for s in samples}  # never skipped
    assert manifests[-1].samples_seen == len(samples)
    # The offsets committed last are the end of the success log, as the last manifest says.
    ends = Counter(e.partition for e in read_topic(run_settings, "trajectories.success"))
    topic = run_settings.topic("trajectories.success")
    assert manifests[-1].input_offsets == {f"{topic}:{p}": ends[p] for p in ends}
    assert _committed(run_settings) == dict(ends)

    # Roll back to v1: served again as the next version, the same files, versions only go up.
    env = {**settings_env(run_settings), "COLUMNS": "200"}  # tables unwrapped

    def webgym(*args):
        return subprocess.run([*CLI, *args], env=env, capture_output=True, text=True)

    done = webgym("policy", "rollback", "1")
    assert done.returncode == 0, done.stderr
    rolled = _versions(run_settings)[-1]
    assert rolled["policy_version"] == numbers[-1] + 1
    manifest = _check_manifest(run_settings, rolled, str(tiny_model))
    assert manifest.training["rollback_of"] == 1 and manifest.files == manifests[0].files
    listing = webgym("policy", "versions")
    assert "rollback to v1" in listing.stdout and "(latest)" in listing.stdout
    bad = webgym("policy", "rollback", "99")
    assert bad.returncode == 1 and "v99 of default does not exist" in bad.stderr
    assert _versions(run_settings)[-1] == rolled  # nothing written
