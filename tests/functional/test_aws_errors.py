"""No botocore exception leaves the store: every public method of the DynamoDB store, against an
endpoint where nothing listens and without credentials, raises this package's error, and the
message names the operation asked for ("listing schedules in table T"), never an internal step."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from botocore.exceptions import BotoCoreError, ClientError

from hexeract_scheduler import ScheduledMessage
from hexeract_scheduler.aws.clients import ClientFactory, Connection
from hexeract_scheduler.domain.model import LeasedOccurrence, Target, Trigger
from hexeract_scheduler.errors import CredentialsMissing, EndpointUnreachable, HexeractError
from hexeract_scheduler.store.dynamo import DynamoScheduleStore

from ..conftest import T0, dead_port

SID = uuid.UUID("01900000-0000-7000-8000-000000000000")
TARGET = "sqs:arn:aws:sqs:us-east-1:123456789012:q"
OCC = LeasedOccurrence(
    SID, T0, 1, 3, "tok", T0 + timedelta(minutes=1), Target.parse(TARGET), Trigger(at=T0), b"{}", "e"
)
MSG = ScheduledMessage.delay(TARGET, at=T0)
TABLE = "t"

# Every public method of the store, called as a user or the worker would, and the operation its
# error must name.
CALLS: dict[str, tuple[Callable[[DynamoScheduleStore], Any], str]] = {
    "create_table": (lambda s: s.create_table(), f"creating table {TABLE}"),
    "shards": (lambda s: s.shards, f"reading the shard count of table {TABLE}"),
    "read_shards": (lambda s: s.read_shards(), f"reading the shard count of table {TABLE}"),
    "ready": (lambda s: s.ready(), f"opening table {TABLE}"),
    "insert": (
        lambda s: s.insert(MSG, T0),
        f"adding schedule {MSG.schedule_id} to table {TABLE}",
    ),
    "inspect": (lambda s: s.inspect(SID), f"inspecting schedule {SID} in table {TABLE}"),
    "pause": (lambda s: s.pause(SID), f"pausing schedule {SID} in table {TABLE}"),
    "resume": (lambda s: s.resume(SID, T0), f"resuming schedule {SID} in table {TABLE}"),
    "cancel": (lambda s: s.cancel(SID), f"cancelling schedule {SID} in table {TABLE}"),
    "replay": (lambda s: s.replay(SID, T0), f"replaying schedule {SID} in table {TABLE}"),
    "list_pending": (lambda s: s.list_pending(), f"listing schedules in table {TABLE}"),
    "list_dead_letter": (lambda s: s.list_dead_letter(), f"listing dead-lettered schedules in table {TABLE}"),
    "find_due": (lambda s: s.find_due(T0, 10), f"finding due schedules in table {TABLE}"),
    "claim_due": (lambda s: s.claim_due(T0, timedelta(seconds=30), 10), f"finding due schedules in table {TABLE}"),
    "claim": (lambda s: s.claim(SID, T0, timedelta(seconds=30)), f"claiming schedule {SID}"),
    "sweep_exhausted": (lambda s: s.sweep_exhausted(SID, T0), f"sweeping schedule {SID}"),
    "mark_delivered": (lambda s: s.mark_delivered(OCC), f"acking delivery of schedule {SID}"),
    "reschedule": (lambda s: s.reschedule(OCC, T0), f"rescheduling schedule {SID}"),
    "mark_failed": (lambda s: s.mark_failed(OCC, "boom", T0), f"recording a failure of schedule {SID}"),
    "mark_dead_lettered": (lambda s: s.mark_dead_lettered(OCC, "boom", T0), f"dead-lettering schedule {SID}"),
}


def test_every_public_method_of_the_store_is_checked_here():
    public = {n for n in dir(DynamoScheduleStore) if not n.startswith("_")}
    attributes = {"executor"}  # the thread pool: no AWS call
    assert public - attributes == set(CALLS)


def _raises(store: DynamoScheduleStore, name: str) -> HexeractError:
    call, what = CALLS[name]
    with pytest.raises(HexeractError) as caught:
        call(store)
    exc = caught.value
    assert not isinstance(exc, (BotoCoreError, ClientError))
    assert str(exc).startswith(f"{what}: "), str(exc)
    assert "shard count" not in str(exc) or name in ("shards", "read_shards"), str(exc)  # no internal step
    return exc


@pytest.mark.parametrize("name", sorted(CALLS))
def test_an_endpoint_where_nothing_listens_raises_endpoint_unreachable_naming_it(name):
    url = f"http://127.0.0.1:{dead_port()}"
    clients = ClientFactory(Connection.parse(url), connect_timeout=1, retries=1)
    store = DynamoScheduleStore(TABLE, dynamodb=clients.dynamodb())
    exc = _raises(store, name)
    assert isinstance(exc, EndpointUnreachable), repr(exc)
    assert exc.endpoint is not None and exc.endpoint.startswith(url)
    assert f"cannot reach the endpoint {url}" in str(exc) and "Connection refused" in str(exc)
    assert "\n" not in str(exc)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_no_credentials_raise_credentials_missing_before_any_request(no_credentials, name):
    store = DynamoScheduleStore(TABLE, dynamodb=ClientFactory(Connection.parse("aws")).dynamodb())
    exc = _raises(store, name)
    assert isinstance(exc, CredentialsMissing), repr(exc)
    assert "no usable AWS credentials" in str(exc) and "AWS_ACCESS_KEY_ID" in str(exc)
    assert no_credentials == []  # not even the dead loopback endpoint was tried


def test_an_unknown_profile_is_a_credentials_error_when_the_clients_are_made(no_credentials, monkeypatch):
    monkeypatch.setenv("AWS_PROFILE", "no-such-profile")
    with pytest.raises(CredentialsMissing, match="no-such-profile"):
        ClientFactory(Connection.parse("aws")).dynamodb()
    assert no_credentials == []
