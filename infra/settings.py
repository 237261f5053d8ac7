"""The one settings object of webgym-streams.

Every value has a default that works on the local stack and an environment variable
``WEBGYM_<FIELD>`` that overrides it (``WEBGYM_BOOTSTRAP_SERVERS``, ``WEBGYM_TOPIC_PREFIX``, ...).
Only the CLI and test fixtures construct it; every other module receives it as a parameter and
never reads the environment itself.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict
from pydantic_settings import SettingsError as EnvironmentParseError

from infra.cpu_group import AUTO_WEIGHT
from schemas.difficulty import DIFFICULTIES

DEFAULT_HORIZONS = {"easy": 10, "medium": 20, "hard": 30}


def _xdg_dir(variable: str, fallback: str) -> Path:
    # Read here, once, as the default of a settings field; no other module looks at os.environ.
    base = os.environ.get(variable) or str(Path.home() / fallback)
    return Path(base) / "webgym"


class SettingsError(ValueError):
    """A setting is missing or inconsistent; the message says which and how to fix it."""


# Chromium's switches that hold a list and keep only their last occurrence (infra.chromium joins
# every occurrence of each into one).
FEATURE_LISTS = ("--disable-features", "--enable-features")


def feature_list(flag: str) -> tuple[str, list[str]] | None:
    """For a flag that sets one of Chromium's feature lists (``--disable-features=A,B``), the
    switch and the features it names (``("--disable-features", ["A", "B"])``); None for any
    other flag. The one reading of such a flag, shared by the settings' check and the launch."""
    switch, _, value = flag.partition("=")
    if switch not in FEATURE_LISTS:
        return None
    return switch, [feature for feature in value.split(",") if feature]


class Settings(BaseSettings):
    """Connection points, names and local directories, with defaults for the local stack."""

    model_config = SettingsConfigDict(env_prefix="WEBGYM_", extra="ignore")

    # Kafka
    bootstrap_servers: str = Field("127.0.0.1:9092", description="Kafka bootstrap servers")
    topic_prefix: str = Field("webgym", description="prefix of every topic name")
    default_partitions: int = Field(
        8, ge=1, description="partitions of every episode-keyed topic (they must share one count)"
    )
    replication_factor: int | None = Field(
        None,
        ge=1,
        description="replication factor of created topics (default: 3 on a cluster of three or "
        "more brokers, else the broker count); min.insync.replicas is one less, at least 1",
    )
    group_protocol: Literal["consumer", "classic"] = Field(
        "consumer",
        description="the browser and policy workers' consumer group protocol: consumer (KIP-848: "
        "incremental, server-side range assignment; Kafka 4.0+) or classic (eager range "
        "assignment; older clusters)",
    )
    local_kafka_brokers: int = Field(
        1, ge=1, le=9, description="KRaft nodes `webgym up` runs (`webgym up --brokers N`)"
    )
    local_kafka_controller_port: int = Field(
        9093,
        description="controller listener port of the local KRaft node (`webgym up`); node N of a "
        "cluster listens 10 * (N - 1) above it",
    )
    local_kafka_heap: str = Field("768m", description="max heap of the local broker JVM")

    # Object storage
    minio_endpoint: str = Field("127.0.0.1:9000", description="MinIO/S3 endpoint host:port")
    minio_secure: bool = Field(False, description="use TLS to reach the endpoint")
    minio_access_key: SecretStr | None = Field(
        None, description="access key; default: the local stack's generated credentials"
    )
    minio_secret_key: SecretStr | None = Field(
        None, description="secret key; default: the local stack's generated credentials"
    )
    policies_bucket: str = Field("webgym-policies", description="bucket for published weights")
    artifacts_bucket: str = Field("webgym-artifacts", description="bucket for other artifacts")

    # Browser
    chromium_path: Path = Field(
        Path("/usr/bin/chromium"), description="Chromium executable Playwright launches"
    )
    chromium_args: str = Field(
        "",
        description="more command-line flags for every Chromium the workers and benchmarks "
        "launch, after webgym's own, split as a shell splits them (e.g. "
        "'--js-flags=--no-memory-reducer'); --disable-features and --enable-features are "
        "joined with Playwright's own lists, not put in their place",
    )
    browser_nice: int = Field(
        0,
        ge=0,
        le=19,
        description="niceness of every Chromium process (0: as the worker); with browsers "
        "saturating the cores, a higher value lets the broker and the workers run first",
    )
    browser_cpu_weight: int | None = Field(
        None,
        ge=0,
        le=10000,
        description="CPU weight of one cgroup that every Chromium process joins (cgroup v2 "
        "cpu.weight, 1-10000, 100 = one ordinary process; v1 cpu.shares scaled alike; 0: no "
        "group); the browsers together then weigh this much, however many there are. Unset: "
        f"{AUTO_WEIGHT} where this user can make the group (root, a delegated cgroup), else no "
        "group",
    )

    # Browser workers
    practice_web_address: str = Field(
        "127.0.0.1:8088",
        description="where `webgym sites serve` listens; browsers map *.webgym.test there",
    )
    browser_navigate_concurrency: int = Field(
        4, ge=1, description="navigations a browser worker runs at once (its own budget)"
    )
    browser_act_concurrency: int = Field(
        8, ge=1, description="actions (click, type, ...) a browser worker runs at once"
    )
    browser_recycle_after: int = Field(
        200, ge=1, description="contexts a browser serves before a fresh browser replaces it"
    )
    browser_jpeg_quality: int = Field(80, ge=1, le=100, description="JPEG screenshot quality")
    screenshot_storage: Literal["inline", "minio"] = Field(
        "inline",
        description="where observations keep their screenshots: inline (the bytes in the event) "
        "or minio (stored once in the artifacts bucket, the event carrying its key and SHA-256; "
        "about 85% fewer bytes in the log). Readers handle both, whatever this says",
    )
    browser_allow_private_hosts: bool = Field(
        False, description="let agents open loopback, private and link-local addresses"
    )

    # Policy workers
    policy_infer_timeout_s: float = Field(
        90.0,
        gt=0,
        description="seconds a policy backend call may take; past it each of its requests gets "
        "an error inference (the episode asks again, within parse_error_budget) and the late "
        "reply is dropped. Keep it below episode_lease_s, or the lease aborts first",
    )
    policy_temperature: float = Field(
        0.0,
        ge=0,
        description="sampling temperature of model backends (0: greedy); exploration for "
        "on-policy data. Evaluation stays greedy whatever this says",
    )
    policy_top_p: float = Field(
        1.0,
        gt=0,
        le=1,
        description="nucleus (top-p) sampling mass of model backends when the temperature is "
        "above 0 (1: the whole distribution)",
    )

    # Stream processors (the Faust app in streams/)
    horizons: dict[str, int] = Field(
        DEFAULT_HORIZONS,
        description="steps an episode may take, by task difficulty (the paper's training "
        'horizons); a JSON object such as {"easy": 5}: difficulties it leaves out keep their '
        "default",
    )
    parse_error_budget: int = Field(
        3, ge=0, description="unparseable replies an episode survives; one more ends it"
    )
    episode_deadline_s: float = Field(
        900.0, gt=0, description="wall time an episode may take before it is finished unanswered"
    )
    episode_lease_s: float = Field(
        120.0, gt=0, description="silence of the browser or policy side that aborts an episode"
    )
    blocked_site_cooldown_s: float = Field(
        3600.0, ge=0, description="how long the sampler avoids a site that showed a bot wall"
    )
    judge_base_url: str | None = Field(
        None, description="OpenAI-compatible endpoint of the LLM rubric judge (real-web tasks)"
    )
    judge_model: str | None = Field(None, description="model name the LLM judge asks for")
    judge_api_key: SecretStr | None = Field(None, description="API key of the judge endpoint")
    judge_max_tokens: int = Field(1024, ge=1, description="reply length limit of the LLM judge")
    judge_concurrency: int = Field(
        8, ge=1, description="trajectories judged at once (slow judges never stall the stream)"
    )
    streams_session_timeout_s: float = Field(
        10.0, gt=0, description="a dead Faust worker's partitions move after this long"
    )
    streams_linger_ms: int = Field(
        0,
        ge=0,
        le=100,
        description="how long the stream processors' producer holds a batch open before it "
        "sends it: 0 sends at once (least latency per hop); a few ms lets the outputs of one "
        "input, its table row and other episodes' events share one produce request",
    )
    event_loop: Literal["uvloop", "asyncio"] = Field(
        "asyncio",
        description="the event loop of the Faust worker and the browser worker: uvloop "
        "(libuv's, written in C) or Python's own asyncio loop. webgym's runs start Faust with "
        "it (FAUST_LOOP); a Faust worker started by hand takes `faust -L uvloop`",
    )
    learner_nice: int | None = Field(
        None,
        ge=0,
        le=19,
        description="niceness of every thread of the learner; unset: 19 when it trains on a CPU "
        "(the rollouts' browsers, workers and broker run first, so they never wait on its "
        "optimiser steps; alone on the machine it still gets every idle core), 0 on a GPU",
    )
    learner_hold_at: Literal["after-step", "mid-upload", "after-announce"] | None = Field(
        None,
        description="crash tests only: the learner stops and waits to be killed at this point",
    )

    # Local directories
    state_dir: Path = Field(
        default_factory=lambda: _xdg_dir("XDG_STATE_HOME", ".local/state"),
        description="data dirs, pid files, logs and generated credentials of the local stack",
    )
    cache_dir: Path = Field(
        default_factory=lambda: _xdg_dir("XDG_CACHE_HOME", ".cache"),
        description="downloaded Kafka jars and the MinIO build; safe to delete",
    )
    run_logs_kept: int = Field(
        50,
        ge=1,
        description="how many earlier runs' log directories (logs/<run id>/) a new run keeps: "
        "the last written; older ones are removed as a run begins",
    )

    @field_validator("topic_prefix")
    @classmethod
    def _topic_prefix_is_legal(cls, value: str) -> str:
        allowed = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
        if not value or not set(value) <= allowed:
            raise ValueError(
                f"topic prefix {value!r} may only use letters, digits, '.', '_' and '-'"
            )
        return value

    @field_validator("chromium_args")
    @classmethod
    def _chromium_args_split(cls, value: str) -> str:
        try:
            flags = shlex.split(value)
        except ValueError as error:
            raise ValueError(f"cannot split {value!r} as a shell would: {error}") from None
        stray = [flag for flag in flags if not flag.startswith("-")]
        if stray:
            raise ValueError(
                f"{', '.join(map(repr, stray))} is not a flag: every word starts with '-' "
                "(give a flag's value as --flag=value)"
            )
        bare = sorted({f for f in flags if (listed := feature_list(f)) and not listed[1]})
        if bare:
            raise ValueError(
                f"{', '.join(map(repr, bare))} names no feature: give the list with the switch, "
                "e.g. --disable-features=SpareRendererForSitePerProcess,OtherFeature"
            )
        return value

    @field_validator("horizons")
    @classmethod
    def _horizons_known_and_positive(cls, value: dict[str, int]) -> dict[str, int]:
        unknown = sorted(set(value) - set(DIFFICULTIES))
        if unknown:
            raise ValueError(
                f"unknown difficulty {', '.join(map(repr, unknown))}: the difficulties are "
                f"{', '.join(DIFFICULTIES)}"
            )
        bad = {name: steps for name, steps in value.items() if steps < 1}
        if bad:
            raise ValueError(f"every horizon must be at least 1 step ({bad} is not)")
        return {**DEFAULT_HORIZONS, **value}

    @model_validator(mode="after")
    def _minio_pair_whole(self) -> Settings:
        if (self.minio_access_key is None) != (self.minio_secret_key is None):
            given, missing = (
                ("WEBGYM_MINIO_ACCESS_KEY", "WEBGYM_MINIO_SECRET_KEY")
                if self.minio_access_key is not None
                else ("WEBGYM_MINIO_SECRET_KEY", "WEBGYM_MINIO_ACCESS_KEY")
            )
            raise ValueError(
                f"{given} is set but {missing} is not: set both (a key pair the server knows), or "
                "neither to use the local stack's generated pair"
            )
        return self

    @property
    def logs_dir(self) -> Path:
        return self.state_dir / "logs"

    @property
    def minio_credentials_file(self) -> Path:
        return self.state_dir / "minio" / "credentials.json"

    def topic(self, suffix: str) -> str:
        """Full topic name for a table entry, e.g. ``topic("observations")``."""
        return f"{self.topic_prefix}.{suffix}"

    def minio_credentials(self) -> tuple[str, str]:
        """Access and secret key: from the settings if given, else the local stack's own."""
        if self.minio_access_key and self.minio_secret_key:
            return (
                self.minio_access_key.get_secret_value(),
                self.minio_secret_key.get_secret_value(),
            )
        path = self.minio_credentials_file
        if not path.exists():
            raise SettingsError(
                f"no MinIO credentials: {path} does not exist. Run `webgym up` to start the local "
                "stack (it generates them), or set WEBGYM_MINIO_ACCESS_KEY and "
                "WEBGYM_MINIO_SECRET_KEY for an existing server."
            )
        stored = json.loads(path.read_text())
        return stored["access_key"], stored["secret_key"]


def load_settings() -> Settings:
    """The settings from the environment; an invalid ``WEBGYM_*`` value is a SettingsError that
    names it (every command reads its settings through here)."""
    try:
        return Settings()
    except ValidationError as exc:
        raise SettingsError(f"invalid WEBGYM_* setting: {_one_line(exc)}") from None
    except EnvironmentParseError as exc:
        # pydantic-settings could not parse a structured value (invalid JSON, for one).
        raise SettingsError(
            f"invalid WEBGYM_* setting: {exc}; give it as JSON, e.g. "
            """WEBGYM_HORIZONS='{"easy": 5}'"""
        ) from None


def _one_line(exc: ValidationError) -> str:
    """``WEBGYM_HORIZONS: unknown difficulty 'eazy' ...; WEBGYM_X: ...`` for every bad field."""
    problems = []
    for error in exc.errors():
        message = error["msg"].removeprefix("Value error, ")
        if not error["loc"]:  # a rule across fields: the message names them
            problems.append(message)
            continue
        name = f"WEBGYM_{str(error['loc'][0]).upper()}"
        secret = "KEY" in name or "SECRET" in name
        problems.append(f"{name}: {message}" + ("" if secret else f" (got {error.get('input')!r})"))
    return "; ".join(problems)
