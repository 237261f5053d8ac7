"""Inference schema v4: a nullable policy version (backends without weights name none) and the
sampling a reply was drawn with; events of v1-v3 still decode, their version kept."""

from __future__ import annotations

import pytest

from schemas.serde import EventEncodeError, default_catalog
from tests.samples import v1_inference

V3 = v1_inference(raw_text="Thought: ...", latency_ms=3.0, model="tiny")


def test_an_old_event_keeps_its_version_and_has_no_sampling():
    catalog = default_catalog()
    for version in (1, 2, 3):
        old = {k: v for k, v in V3.items()}
        decoded = catalog.decode(catalog.encode("inference", old, version=version))
        assert decoded.writer_version == version
        assert decoded.record["policy_version"] == 5
        assert (decoded.record["temperature"], decoded.record["top_p"]) == (None, None)


def test_v4_records_no_version_for_a_backend_without_weights_and_the_sampling():
    catalog = default_catalog()
    assert catalog.latest("inference").version >= 4
    scripted = {**V3, "policy_version": None, "backend": "scripted"}
    assert catalog.decode(catalog.encode("inference", scripted)).record["policy_version"] is None
    sampled = {**V3, "temperature": 0.7, "top_p": 0.95}
    record = catalog.decode(catalog.encode("inference", sampled)).record
    assert (record["policy_version"], record["temperature"], record["top_p"]) == (5, 0.7, 0.95)
    with pytest.raises(EventEncodeError):
        catalog.encode("inference", scripted, version=3)  # v3 cannot say "no version"
