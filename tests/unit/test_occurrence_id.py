"""OccurrenceId must match hexeract bit for bit: every vector in tests/data is checked."""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from pathlib import Path

import pytest

from hexeract_scheduler import OccurrenceId
from hexeract_scheduler.domain.occurrence import epoch_offset_ns

# Computed with the Rust `uuid` crate, as hexeract derives them (docs/contracts.md#occurrence-id).
VECTORS_FILE = Path(__file__).resolve().parents[1] / "data" / "occurrence_id_vectors.json"
VECTORS = json.loads(VECTORS_FILE.read_text())["vectors"]


def test_the_vectors_are_there():
    assert len(VECTORS) >= 12


@pytest.mark.parametrize("vector", VECTORS, ids=lambda v: f"{v['schedule_id'][-4:]}@{v['scheduled_for']}")
def test_vector(vector):
    instant = datetime.fromisoformat(vector["scheduled_for"].replace("Z", "+00:00"))
    assert epoch_offset_ns(instant) == vector["epoch_offset_ns"]
    sid = uuid.UUID(vector["schedule_id"])
    assert str(OccurrenceId.derive(sid, instant)) == vector["occurrence_id"]
    assert str(OccurrenceId.derive_ns(sid, vector["epoch_offset_ns"])) == vector["occurrence_id"]


def test_derived_ids_are_uuid_v5():
    oid = OccurrenceId.derive(uuid.UUID(int=1), datetime.fromisoformat("2026-01-01T00:00:00+00:00"))
    assert oid.value.version == 5
    assert oid.value.variant == uuid.RFC_4122
