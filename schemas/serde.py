"""Avro single-object encoding of webgym events, with no registry.

Wire format (Avro 1.11 spec, "Single-object encoding"): the two-byte marker ``C3 01``, the
8-byte little-endian CRC-64-AVRO fingerprint of the writer schema's Parsing Canonical Form, then
the Avro binary body. Every version of every schema ever shipped stays in ``schemas/avro/<event
type>/v<N>.avsc``; a reader finds the writer schema by fingerprint and resolves it against the
newest version of the same event type (Avro schema resolution: fields added later take their
defaults). Encoding always uses the newest version.

Guarantees: ``decode(encode(t, r))`` returns ``r`` with defaults filled in; bytes that are not a
webgym event raise :class:`CorruptEventError`; a fingerprint we do not know raises
:class:`UnknownSchemaError`. Both are :class:`EventDecodeError`, the poison-record class that
consumers route to the dead-letter topic.
"""

from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import fastavro
from fastavro.schema import to_parsing_canonical_form

MARKER = b"\xc3\x01"
HEADER_SIZE = len(MARKER) + 8
SCHEMA_ROOT = Path(__file__).parent / "avro"
_VERSION_FILE = re.compile(r"^v(\d+)\.avsc$")

_CRC64_EMPTY = 0xC15D213AA4D7A795


def _crc64_table() -> tuple[int, ...]:
    table = []
    for byte in range(256):
        fp = byte
        for _ in range(8):
            fp = (fp >> 1) ^ (_CRC64_EMPTY if fp & 1 else 0)
        table.append(fp)
    return tuple(table)


_CRC64_TABLE = _crc64_table()


def crc64_avro(data: bytes) -> int:
    """The CRC-64-AVRO fingerprint (Rabin) of ``data``, as the spec defines it."""
    fp = _CRC64_EMPTY
    for byte in data:
        fp = (fp >> 8) ^ _CRC64_TABLE[(fp ^ byte) & 0xFF]
    return fp


class EventDecodeError(ValueError):
    """Bytes that cannot become an event. Consumers treat this as a poison record."""


class CorruptEventError(EventDecodeError):
    """Not a single-object-encoded event, or a body that does not match its schema."""


class UnknownSchemaError(EventDecodeError):
    """The writer's fingerprint names no schema version kept in ``schemas/avro``."""


class EventEncodeError(ValueError):
    """A record that does not fit its event type's schema; the message names the problem."""


@dataclass(frozen=True)
class SchemaVersion:
    event_type: str
    version: int
    parsed: dict[str, Any]
    fingerprint: bytes  # 8 bytes, little-endian, as on the wire
    path: Path

    @property
    def fingerprint_hex(self) -> str:
        return self.fingerprint.hex()


@dataclass(frozen=True)
class DecodedEvent:
    event_type: str
    writer_version: int
    record: dict[str, Any]


class SchemaCatalog:
    """Every kept schema version, indexed by fingerprint and by event type."""

    def __init__(self, versions: list[SchemaVersion]):
        self._by_fingerprint: dict[bytes, SchemaVersion] = {}
        self._latest: dict[str, SchemaVersion] = {}
        for version in versions:
            clash = self._by_fingerprint.get(version.fingerprint)
            if clash is not None:
                raise ValueError(f"{version.path} has the same schema as {clash.path}")
            self._by_fingerprint[version.fingerprint] = version
            latest = self._latest.get(version.event_type)
            if latest is None or version.version > latest.version:
                self._latest[version.event_type] = version

    @classmethod
    def load(cls, root: Path = SCHEMA_ROOT) -> SchemaCatalog:
        versions = []
        for path in sorted(root.glob("*/v*.avsc")):
            match = _VERSION_FILE.match(path.name)
            if not match:
                continue
            raw = json.loads(path.read_text())
            parsed = fastavro.parse_schema(raw, _write_hint=False)
            canonical = to_parsing_canonical_form(raw).encode()
            fingerprint = crc64_avro(canonical).to_bytes(8, "little")
            versions.append(
                SchemaVersion(path.parent.name, int(match.group(1)), parsed, fingerprint, path)
            )
        if not versions:
            raise FileNotFoundError(f"no schemas found under {root}")
        return cls(versions)

    @property
    def event_types(self) -> list[str]:
        return sorted(self._latest)

    def versions(self) -> list[SchemaVersion]:
        return sorted(self._by_fingerprint.values(), key=lambda v: (v.event_type, v.version))

    def latest(self, event_type: str) -> SchemaVersion:
        try:
            return self._latest[event_type]
        except KeyError:
            raise EventEncodeError(
                f"unknown event type {event_type!r}; known: {', '.join(self.event_types)}"
            ) from None

    def encode(self, event_type: str, record: dict[str, Any], version: int | None = None) -> bytes:
        """Single-object encoding of ``record`` with the newest (or the given) schema version."""
        schema = self.latest(event_type)
        if version is not None and version != schema.version:
            schema = self._exact(event_type, version)
        buffer = io.BytesIO()
        buffer.write(MARKER)
        buffer.write(schema.fingerprint)
        try:
            fastavro.schemaless_writer(buffer, schema.parsed, record, strict_allow_default=True)
        except (ValueError, TypeError, KeyError, AttributeError, OverflowError) as exc:
            raise EventEncodeError(
                f"{event_type} v{schema.version} record does not fit its schema: {exc}"
            ) from exc
        return buffer.getvalue()

    def decode(self, data: bytes | None, expected_type: str | None = None) -> DecodedEvent:
        """Decode with the writer schema found by fingerprint, resolved to the newest version."""
        if data is None:
            raise CorruptEventError("empty record (null value) is not an event")
        if len(data) < HEADER_SIZE or data[:2] != MARKER:
            raise CorruptEventError(
                f"not an Avro single-object encoding: expected marker c301 and a fingerprint, "
                f"got {len(data)} bytes starting {data[:4].hex() or '(nothing)'}"
            )
        fingerprint = data[2:HEADER_SIZE]
        writer = self._by_fingerprint.get(fingerprint)
        if writer is None:
            raise UnknownSchemaError(
                f"unknown writer schema fingerprint {fingerprint.hex()}: no version under "
                f"schemas/avro matches; the producer uses a schema this reader does not have "
                f"(upgrade webgym-streams here, or add the .avsc file)"
            )
        if expected_type is not None and writer.event_type != expected_type:
            raise CorruptEventError(
                f"expected a {expected_type} event, got {writer.event_type} v{writer.version}"
            )
        reader = self._latest[writer.event_type]
        body = io.BytesIO(data)
        body.seek(HEADER_SIZE)
        try:
            record = fastavro.schemaless_reader(
                body, writer.parsed, None if reader is writer else reader.parsed
            )
        except Exception as exc:  # fastavro raises many types on garbage; all mean corrupt
            raise CorruptEventError(
                f"{writer.event_type} v{writer.version} body is corrupt: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        trailing = len(data) - body.tell()
        if trailing:
            raise CorruptEventError(
                f"{writer.event_type} v{writer.version} body is corrupt: "
                f"{trailing} bytes left after the record"
            )
        return DecodedEvent(writer.event_type, writer.version, record)

    def _exact(self, event_type: str, version: int) -> SchemaVersion:
        for candidate in self._by_fingerprint.values():
            if candidate.event_type == event_type and candidate.version == version:
                return candidate
        raise EventEncodeError(f"no {event_type} schema version {version} in schemas/avro")


@lru_cache(maxsize=1)
def default_catalog() -> SchemaCatalog:
    """The catalog of the schemas shipped with this package (parsed once per process)."""
    return SchemaCatalog.load()
