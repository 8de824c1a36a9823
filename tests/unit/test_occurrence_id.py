"""OccurrenceId must match hexeract bit for bit: every shared vector is checked."""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from pathlib import Path

import pytest

from hexeract_scheduler import OccurrenceId
from hexeract_scheduler.occurrence import epoch_offset_ns

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared" / "occurrence_id_vectors.json"
VENDORED = REPO / "tests" / "data" / "occurrence_id_vectors.json"


def _vectors_file() -> Path:
    # The shared file is the reference (CI lays ../shared beside the clone); the vendored copy
    # keeps a bare clone testable, and is checked against the shared file whenever both exist.
    return SHARED if SHARED.exists() else VENDORED


VECTORS = json.loads(_vectors_file().read_text())["vectors"]


def test_the_vendored_vectors_match_the_shared_ones():
    if not SHARED.exists():
        pytest.skip("../shared is not beside this checkout")
    assert json.loads(VENDORED.read_text()) == json.loads(SHARED.read_text())


def test_the_shared_vectors_are_there():
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
