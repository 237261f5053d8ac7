"""Fixtures shared by the integration and end-to-end tiers."""

from __future__ import annotations

import os

import pytest

from infra import stack
from infra.settings import Settings


@pytest.fixture(scope="session")
def stack_settings() -> Settings:
    """Settings of the running stack (shared topic prefix: only for stack-level checks).

    Brings up the project's local stack (`webgym up`, idempotent), unless
    WEBGYM_TEST_EXISTING_STACK=1 points the tests at an existing cluster.
    """
    settings = Settings()
    if os.environ.get("WEBGYM_TEST_EXISTING_STACK") != "1":
        stack.up(settings, report=lambda line: None)
    return settings
