"""Changelog rows compressed by the ``zlib-rows`` codec, and rows written before it."""

from __future__ import annotations

import json

from faust.serializers import codecs

from streams.row_codec import TABLE_SERIALIZER, compressed, plain

ROW = {
    "episode_id": "run-000001",
    "status": "thinking",
    "history": [{"step": s, "reply": "click [3] because the page says so" * 4} for s in range(12)],
    "end": None,
}


def test_a_row_goes_through_the_table_serializer_unchanged_and_smaller():
    codec = codecs.get_codec(TABLE_SERIALIZER)
    stored = codec.dumps(ROW)
    assert codec.loads(stored) == ROW
    assert len(stored) * 4 < len(json.dumps(ROW).encode())


def test_a_row_an_earlier_version_wrote_as_plain_json_still_loads():
    codec = codecs.get_codec(TABLE_SERIALIZER)
    assert codec.loads(json.dumps(ROW).encode()) == ROW
    assert codec.loads(b"null") is None


def test_plain_undoes_compressed_and_leaves_json_alone():
    row = json.dumps(ROW).encode()
    assert plain(compressed(row)) == row
    assert plain(row) == row
