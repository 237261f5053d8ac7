"""Avro schemas of every webgym event (``avro/<event type>/v<N>.avsc``) and their serde."""

from schemas.serde import (
    CorruptEventError,
    DecodedEvent,
    EventDecodeError,
    EventEncodeError,
    SchemaCatalog,
    UnknownSchemaError,
    default_catalog,
)

__all__ = [
    "CorruptEventError",
    "DecodedEvent",
    "EventDecodeError",
    "EventEncodeError",
    "SchemaCatalog",
    "UnknownSchemaError",
    "default_catalog",
]
