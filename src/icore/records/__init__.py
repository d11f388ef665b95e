"""Records, canonical codec, lineage traversal and the frontier (planfence Sec. 3, App. A).

Pure layer: no I/O, no clock.
"""

from icore.records._codec import (
    MAX_RECORD_BYTES,
    decode_record,
    encode_record,
    plain_record_from_wire,
    record_from_wire,
    record_to_wire,
)
from icore.records._lineage import (
    MAX_LINEAGE_RECORDS,
    Frontier,
    Lookup,
    TraversalMode,
    ancestors,
    frontier,
    is_chain_link,
    lineage_inputs,
)
from icore.records._record import (
    MAX_CONTENT_BYTES,
    MAX_KEY_LEN,
    MAX_PARENTS,
    SCHEMA_VERSION,
    JSONValue,
    Record,
    RecordId,
    canonical_json,
    content_address,
    derive,
    is_record_id,
)

__all__ = [
    "MAX_CONTENT_BYTES",
    "MAX_KEY_LEN",
    "MAX_LINEAGE_RECORDS",
    "MAX_PARENTS",
    "MAX_RECORD_BYTES",
    "SCHEMA_VERSION",
    "Frontier",
    "JSONValue",
    "Lookup",
    "Record",
    "RecordId",
    "TraversalMode",
    "ancestors",
    "canonical_json",
    "content_address",
    "decode_record",
    "derive",
    "encode_record",
    "frontier",
    "is_chain_link",
    "is_record_id",
    "lineage_inputs",
    "plain_record_from_wire",
    "record_from_wire",
    "record_to_wire",
]
