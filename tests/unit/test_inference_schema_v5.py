"""Inference schema v5: a backend that gave no reply is a field of the event, not a prefix on
its parse error; events written before v5 are read the same way through schemas.inference."""

from __future__ import annotations

from schemas.inference import backend_error, no_action_reason, parse_error
from schemas.serde import default_catalog
from tests.samples import v1_inference

BASE = v1_inference()


def test_v5_carries_the_backend_error_as_a_field():
    catalog = default_catalog()
    assert catalog.latest("inference").version == 5
    record = catalog.decode(
        catalog.encode("inference", {**BASE, "backend_error": "no answer within 1 s"})
    ).record
    assert (record["parse_error"], record["backend_error"]) == (None, "no answer within 1 s")
    assert backend_error(record) == "no answer within 1 s"
    assert parse_error(record) is None
    assert no_action_reason(record) == "backend error: no answer within 1 s"


def test_an_event_before_v5_with_the_prefix_reads_as_a_backend_error():
    catalog = default_catalog()
    old = {**BASE, "parse_error": "backend error: RuntimeError: out of memory"}
    decoded = catalog.decode(catalog.encode("inference", old, version=4))
    assert decoded.writer_version == 4
    assert decoded.record["backend_error"] is None  # the default: the field did not exist
    assert backend_error(decoded.record) == "RuntimeError: out of memory"
    assert parse_error(decoded.record) is None


def test_a_parse_error_stays_a_parse_error():
    record = {**BASE, "parse_error": "no <tool_call>...</tool_call> block in the reply"}
    assert backend_error(record) is None
    assert parse_error(record) == no_action_reason(record) == record["parse_error"]
    assert no_action_reason(BASE) is None
