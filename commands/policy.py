"""``webgym policy versions|rollback``: published policy versions (weights in MinIO)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from commands.errors import console, user_errors
from infra.minio_store import build_minio
from infra.producer import EventProducer
from infra.settings import load_settings
from infra.weights import (
    WeightsRejected,
    latest_announced,
    read_manifest,
    rollback,
    stored_versions,
)

policy_app = typer.Typer(
    help="Published policy versions (weights in MinIO, announced on webgym.policy.versions).",
    no_args_is_help=True,
)


@policy_app.command("versions")
@user_errors
def policy_versions(
    policy_name: Annotated[str, typer.Option(help="the policy")] = "default",
) -> None:
    """List the stored versions of a policy: samples seen, optimiser steps, last loss, origin."""

    settings = load_settings()
    client = build_minio(settings)
    latest = latest_announced(settings, policy_name)
    serving = latest["policy_version"] if latest else 0
    stored = stored_versions(client, settings, policy_name)
    if latest is None and not stored:
        known = sorted(
            item.object_name.split("/")[1]
            for item in client.list_objects(settings.policies_bucket, prefix="policies/")
            if item.is_dir
        )
        raise WeightsRejected(
            f"no policy named {policy_name!r}: no version of it is stored in "
            f"{settings.policies_bucket} or announced on {settings.topic('policy.versions')}. "
            f"Stored policies: {', '.join(known) or 'none'}; pick one with --policy-name, or "
            "train one with `webgym learner`"
        )
    table = Table("version", "samples seen", "optimiser steps", "last loss", "origin", "files")
    for version in stored:
        try:
            manifest = read_manifest(client, settings, policy_name, version)
        except WeightsRejected:
            table.add_row(f"v{version}", "-", "-", "-", "incomplete upload (never announced)", "-")
            continue
        training = manifest.training
        origin = (
            f"rollback to v{training['rollback_of']}"
            if "rollback_of" in training
            else f"trained from v{manifest.parent_version or 0}"
        )
        losses = training.get("losses") or []
        table.add_row(
            f"v{version}" + (" (latest)" if version == serving else ""),
            str(manifest.samples_seen),
            str(training.get("optimizer_steps", "-")),
            f"{losses[-1]:.4f}" if losses else "-",
            origin,
            str(len(manifest.files)),
        )
    console.print(table)
    if latest is None:
        console.print(f"no version of {policy_name} is announced yet; start `webgym learner`")


@policy_app.command("rollback")
@user_errors
def policy_rollback(
    version: Annotated[int, typer.Argument(help="the stored version to serve again")],
    policy_name: Annotated[str, typer.Option(help="the policy")] = "default",
) -> None:
    """Serve an older version again, published as the next version (versions only go up).

    Policy workers swap it in like any new version; a running learner sees a newer version than
    its own and resumes from it (its unpublished steps are dropped).
    """

    settings = load_settings()
    producer = EventProducer.connect(settings, "webgym-policy-rollback")
    event = rollback(build_minio(settings), settings, producer, policy_name, version)
    console.print(
        f"{policy_name} v{event['policy_version']} now serves the weights of v{version} "
        f"({event['location']})"
    )
