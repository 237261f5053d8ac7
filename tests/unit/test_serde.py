"""Schemas and the single-object serde: round trips, evolution, and precise rejection."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastavro.schema import fingerprint as fastavro_fingerprint
from fastavro.schema import to_parsing_canonical_form
from hypothesis import given
from hypothesis import strategies as st

from schemas.serde import (
    MARKER,
    CorruptEventError,
    EventDecodeError,
    EventEncodeError,
    SchemaCatalog,
    UnknownSchemaError,
    crc64_avro,
    default_catalog,
)
from tests.samples import sample

DATA = Path(__file__).parent.parent / "data"
CATALOG = default_catalog()
EVENT_TYPES = [
    "task",
    "episode",
    "navigate_op",
    "act_op",
    "observation",
    "infer_request",
    "inference",
    "trajectory",
    "scored_trajectory",
    "policy_version",
    "eval_result",
    "dead_letter",
    "curriculum",
]


def test_every_event_type_of_the_design_has_a_schema():
    assert CATALOG.event_types == sorted(EVENT_TYPES)


@pytest.mark.parametrize("event_type", EVENT_TYPES)
def test_round_trip(event_type):
    record = sample(event_type)
    encoded = CATALOG.encode(event_type, record)
    assert encoded[:2] == MARKER
    assert encoded[2:10] == CATALOG.latest(event_type).fingerprint
    decoded = CATALOG.decode(encoded)
    assert decoded.event_type == event_type
    # Fields the sample left out come back as their schema defaults; the rest exactly as sent.
    assert _sent_fields(decoded.record, record) == record
    assert CATALOG.encode(event_type, decoded.record) == encoded


def _sent_fields(decoded, sent):
    """``decoded`` restricted to the keys present in ``sent``, at every depth."""
    if isinstance(sent, dict):
        return {key: _sent_fields(decoded[key], value) for key, value in sent.items()}
    if isinstance(sent, list):
        return [_sent_fields(d, s) for d, s in zip(decoded, sent, strict=True)]
    return decoded


@pytest.mark.parametrize("event_type", EVENT_TYPES)
def test_every_schema_carries_the_envelope(event_type):
    fields = {f["name"]: f["type"] for f in CATALOG.latest(event_type).parsed["fields"]}
    assert fields["event_id"] == "string"
    assert fields["ts"] == "long"
    unscoped = {"task", "policy_version", "dead_letter", "curriculum", "eval_result"}
    episode_scoped = event_type not in unscoped
    # A curriculum notice or an episode's evaluation result may name an episode (optional), but
    # neither has a step.
    assert ("episode_id" in fields) == episode_scoped or event_type in {"curriculum", "eval_result"}
    assert ("step" in fields) == episode_scoped
    if event_type in {"episode", "act_op", "infer_request", "inference", "policy_version"}:
        assert "policy_version" in fields


def test_fingerprint_is_crc64_avro_of_the_canonical_form():
    for version in CATALOG.versions():
        canonical = to_parsing_canonical_form(json.loads(version.path.read_text()))
        # fastavro writes the 8 fingerprint bytes little-endian, as the wire format does.
        assert version.fingerprint.hex() == fastavro_fingerprint(canonical, "CRC-64-AVRO")
    # The spec's empty-input value.
    assert crc64_avro(b"") == 0xC15D213AA4D7A795


def test_archived_v1_observation_decodes_with_the_newer_reader():
    archived = (DATA / "observation.v1.bin").read_bytes()
    v1 = next(v for v in CATALOG.versions() if v.event_type == "observation" and v.version == 1)
    assert archived[2:10] == v1.fingerprint
    assert CATALOG.latest("observation").version >= 2
    decoded = CATALOG.decode(archived)
    assert decoded.writer_version == 1
    assert decoded.record["timings_ms"] == {}  # the v2 field's default
    expected = sample("observation")
    assert decoded.record["screenshot"] == expected["screenshot"]
    assert decoded.record["title"] == expected["title"]


def test_archived_v1_task_and_target_decode_with_the_newest_readers():
    task = CATALOG.decode((DATA / "task.v1.bin").read_bytes(), "task")
    assert (task.writer_version, CATALOG.latest("task").version) == (1, 2)
    assert task.record["task_id"] == sample("task")["task_id"]
    assert task.record["task_set"] == ""  # a v1 task belongs to no set
    target = CATALOG.decode((DATA / "curriculum.v1.bin").read_bytes(), "curriculum")
    assert (target.writer_version, CATALOG.latest("curriculum").version) == (1, 3)
    assert target.record["kind"] == "target" and target.record["run_id"] == "run1"
    assert target.record["task_sets"] == {}  # a v1 target names no set
    marks = (target.record["purpose"], target.record["pinned_version"], target.record["phase"])
    assert marks == ("train", None, None)  # an old run trains, served by the followed version


def test_old_versions_are_kept():
    observation_versions = [v.version for v in CATALOG.versions() if v.event_type == "observation"]
    assert observation_versions == [1, 2, 3, 4, 5]


def test_not_an_event():
    with pytest.raises(CorruptEventError, match="expected marker c301"):
        CATALOG.decode(b'{"json": "is not avro"}')
    with pytest.raises(CorruptEventError, match="null value"):
        CATALOG.decode(None)
    with pytest.raises(CorruptEventError, match="got 3 bytes"):
        CATALOG.decode(MARKER + b"\x01")


def test_unknown_fingerprint_names_it():
    encoded = CATALOG.encode("episode", sample("episode"))
    forged = MARKER + bytes.fromhex("0123456789abcdef") + encoded[10:]
    with pytest.raises(UnknownSchemaError, match="0123456789abcdef"):
        CATALOG.decode(forged)


def test_truncated_and_padded_bodies_are_corrupt():
    encoded = CATALOG.encode("observation", sample("observation"))
    with pytest.raises(CorruptEventError, match=r"observation v\d+ body is corrupt"):
        CATALOG.decode(encoded[:-40])
    with pytest.raises(CorruptEventError, match="3 bytes left after the record"):
        CATALOG.decode(encoded + b"abc")


def test_expected_type_mismatch_is_rejected():
    encoded = CATALOG.encode("episode", sample("episode"))
    with pytest.raises(CorruptEventError, match="expected a observation event, got episode v2"):
        CATALOG.decode(encoded, expected_type="observation")


def test_encode_rejects_records_that_do_not_fit():
    record = sample("episode")
    del record["task_id"]
    with pytest.raises(EventEncodeError, match="episode v2"):
        CATALOG.encode("episode", record)
    with pytest.raises(EventEncodeError, match="unknown event type 'episod'"):
        CATALOG.encode("episod", record)


def test_two_files_with_one_schema_are_refused(tmp_path):
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "v1.avsc").write_text('{"type": "record", "name": "X", "fields": []}')
    with pytest.raises(ValueError, match="same schema"):
        SchemaCatalog.load(tmp_path)


@given(st.binary(max_size=300))
def test_arbitrary_bytes_decode_or_raise_a_decode_error(data):
    try:
        CATALOG.decode(data)
    except EventDecodeError:
        pass


@given(st.binary(max_size=200))
def test_garbage_after_a_real_header_is_a_decode_error(body):
    header = MARKER + CATALOG.latest("inference").fingerprint
    try:
        CATALOG.decode(header + body)
    except EventDecodeError:
        pass
