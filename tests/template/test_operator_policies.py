"""The operator policies of template.yaml against what the CLI really calls.

moto does not enforce IAM, so, like the handlers' policy tests (tests/functional/test_handlers.py),
these record every AWS request the CLI makes (hooked below every client, at
``BaseClient._make_api_call``) and check each one, action and resource, against the statements of
``ReadOnlyPolicy`` or ``OperatorPolicy`` as the template declares them, resolved for this test's
table. The table is created as the stack creates it, from the template's ``SchedulesTable``: no
``#meta`` item, nothing recorded in it yet, which is what an operator meets right after a deploy.
They live with the template's other tests and borrow the CLI tests' ``hexeract`` fixture
(tests/template/conftest.py).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

import pytest
from botocore.client import BaseClient

from hexeract_scheduler.aws.clients import ClientFactory
from hexeract_scheduler.aws.stack import TABLE_OUTPUT

from ..cli.conftest import Hexeract
from ..cli.test_where import make_stack
from ..conftest import Backend, Queue, unique
from ..support.cfn_eval import load_template
from .conftest import CLI_WRITE_ACTIONS, DYNAMODB_WRITE_ACTIONS, as_list, policy_statements

REGION, ACCOUNT = "us-east-1", "123456789012"
DEAD_LETTER_FUNCTION_ARN = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:stack-DeadLetterFunction-0123"
META_ID = "#meta"


def table_arn(table: str) -> str:
    return f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{table}"


def stack_arn(stack: str) -> str:
    return f"arn:aws:cloudformation:{REGION}:{ACCOUNT}:stack/{stack}/0123abcd-0000-0000-0000-000000000000"


# -- what the CLI calls ------------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    action: str  # the IAM action: service:Operation
    resources: tuple[str, ...]  # the ARNs IAM authorises it against
    key: str | None = None  # the schedule_id of a single-item request

    def __str__(self) -> str:
        return f"{self.action} on {', '.join(self.resources)}" + (f" (item {self.key})" if self.key else "")


def _call(service: str, operation: str, params: dict[str, Any]) -> Call:
    action = f"{service}:{operation}"
    if service == "cloudformation" and "StackName" in params:
        return Call(action, (stack_arn(params["StackName"]),))
    if service != "dynamodb":
        return Call(action, ("(not a DynamoDB request)",))
    if operation == "BatchGetItem":
        return Call(action, tuple(table_arn(t) for t in params["RequestItems"]))
    arn = table_arn(params["TableName"])
    if "IndexName" in params:
        arn += f"/index/{params['IndexName']}"
    item = params.get("Key") or params.get("Item") or {}
    key = item.get("schedule_id", {}).get("S")
    return Call(action, (arn,), key)


@dataclass
class Recorder:
    calls: list[Call] = field(default_factory=list)
    on: bool = False

    @contextmanager
    def recording(self) -> Iterator[None]:
        self.on = True
        try:
            yield
        finally:
            self.on = False


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    """Every AWS request made in this process inside ``recorder.recording()``."""
    rec = Recorder()
    real = BaseClient._make_api_call

    def recording(self: BaseClient, operation_name: str, api_params: dict[str, Any]) -> Any:
        if rec.on:
            rec.calls.append(_call(self.meta.service_model.signing_name, operation_name, api_params))
        return real(self, operation_name, api_params)

    monkeypatch.setattr(BaseClient, "_make_api_call", recording)
    return rec


# -- what the policies allow -------------------------------------------------------------------


def _resolve(value: Any, table: str, stack: str) -> str:
    """A policy statement's Resource as the deployed stack resolves it, for this test's table and stack."""
    attributes = {"SchedulesTable.Arn": table_arn(table), "DeadLetterFunction.Arn": DEAD_LETTER_FUNCTION_ARN}
    if value == {"Ref": "AWS::StackId"}:
        return stack_arn(stack)
    if isinstance(value, dict) and set(value) == {"Fn::GetAtt"}:
        return attributes[".".join(value["Fn::GetAtt"])]
    if isinstance(value, dict) and set(value) == {"Fn::Sub"} and isinstance(value["Fn::Sub"], str):
        return re.sub(r"\$\{([^}]+)\}", lambda m: attributes[m.group(1)], value["Fn::Sub"])
    if isinstance(value, str):
        return value
    raise AssertionError(f"no resolution for {value!r}")


@dataclass(frozen=True)
class Policy:
    name: str
    statements: list[tuple[list[str], list[str]]]  # (actions, resource patterns) of each Allow

    def allows(self, call: Call) -> bool:
        """IAM's rule for one request: some Allow statement matches the action and, for every
        resource the request touches, the resource (no Deny statements here; checked below)."""
        return all(
            any(
                any(fnmatchcase(call.action, a) for a in actions) and any(fnmatchcase(arn, r) for r in patterns)
                for actions, patterns in self.statements
            )
            for arn in call.resources
        )


def load_policy(name: str, table: str, stack: str = "the-stack") -> Policy:
    template = load_template()
    statements = []
    for stmt in policy_statements(template, name):
        assert stmt["Effect"] == "Allow" and "Condition" not in stmt and "NotAction" not in stmt, stmt
        statements.append((as_list(stmt["Action"]), [_resolve(r, table, stack) for r in as_list(stmt["Resource"])]))
    return Policy(name, statements)


# -- a table as the stack creates it, and a dead letter ----------------------------------------


def stack_table(clients: ClientFactory) -> tuple[str, str]:
    """A table with the template's own definition (keys, indexes, billing), and nothing in it; and a
    stack (on moto) whose output names it, as a deploy leaves them."""
    template = load_template()
    props = template["Resources"]["SchedulesTable"]["Properties"]
    name = unique("stack-schedules")
    dynamodb = clients.dynamodb()
    dynamodb.create_table(
        TableName=name,
        **{k: props[k] for k in ("AttributeDefinitions", "KeySchema", "GlobalSecondaryIndexes", "BillingMode")},
    )
    dynamodb.get_waiter("table_exists").wait(TableName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 60})
    return name, make_stack(clients, {TABLE_OUTPUT: name})


def ok(hexeract: Hexeract, table: str, *args: str, stack: str | None = None) -> str:
    """``hexeract scheduler ARGS --table TABLE``, or ``--stack STACK`` when given."""
    result = (
        hexeract("scheduler", *args, "--stack", stack, table=None)
        if stack
        else hexeract("scheduler", *args, table=table)
    )
    assert result.exit_code == 0, f"hexeract scheduler {' '.join(args)}: {result.output}"
    return result.output


def dead_letter_one(hexeract: Hexeract, table: str, backend: Backend) -> str:
    """A schedule aimed at a queue that does not exist, one attempt, run once: dead-lettered."""
    missing = f"sqs:{backend.aws_url}/{ACCOUNT}/missing-{uuid.uuid4().hex[:8]}"
    sid = ok(hexeract, table, "add", "--at", "now", "--max-attempts", "1", "--target", missing).strip()
    summary = json.loads(ok(hexeract, table, "worker", "--once").strip().splitlines()[-1])
    assert summary["dead_lettered"] == 1, summary
    return sid


# -- read-only ---------------------------------------------------------------------------------


def read_commands(
    hexeract: Hexeract, table: str, stack: str, backend: Backend, queue: Queue, recorder: Recorder
) -> list[Call]:
    """``list``, ``inspect`` and ``dead-letter list`` on the table a deploy leaves (empty, no
    ``#meta``), then on one with schedules and a dead letter in it, named with ``--table`` or
    ``--stack``; only the reads are recorded."""
    with recorder.recording():
        ok(hexeract, table, "list", stack=stack)
        assert json.loads(ok(hexeract, table, "list", "--format", "json")) == []
        assert json.loads(ok(hexeract, table, "dead-letter", "list", "--format", "json")) == []
        missing = hexeract("scheduler", "inspect", str(uuid.uuid4()), table=table)
        assert missing.exit_code != 0 and "not found" in missing.output, missing.output

    pending = ok(hexeract, table, "add", "--cron", "*/5 * * * *", "--target", queue.target).strip()
    dead = dead_letter_one(hexeract, table, backend)

    with recorder.recording():
        assert pending in ok(hexeract, table, "list", "--format", "json")
        assert pending in ok(hexeract, table, "inspect", pending, stack=stack)
        assert dead in ok(hexeract, table, "inspect", dead, "--format", "json")
        assert dead in ok(hexeract, table, "dead-letter", "list", "--format", "json")
        assert dead in ok(hexeract, table, "dead-letter", "list")
    assert recorder.calls
    return recorder.calls


def _meta_write(call: Call) -> bool:
    return call.action in DYNAMODB_WRITE_ACTIONS and call.key == META_ID


def test_the_read_only_policy_allows_every_read_list_inspect_and_dead_letter_list_make(
    hexeract, backend: Backend, clients: ClientFactory, queue: Queue, recorder: Recorder
):
    table, stack = stack_table(clients)
    calls = read_commands(hexeract, table, stack, backend, queue, recorder)
    policy = load_policy("ReadOnlyPolicy", table, stack)
    # Every request apart from the #meta writes (the next test, an expected failure until reads
    # stop writing) is allowed: nothing else a read command needs is missing from the policy.
    refused = [str(c) for c in calls if not policy.allows(c) and not _meta_write(c)]
    assert refused == [], "\n".join(refused)
    assert {"dynamodb:Query", "dynamodb:GetItem", "dynamodb:BatchGetItem"} <= {c.action for c in calls}
    assert "cloudformation:DescribeStacks" in {c.action for c in calls}  # --stack was recorded too


def test_list_inspect_and_dead_letter_list_never_write(
    hexeract, backend: Backend, clients: ClientFactory, queue: Queue, recorder: Recorder
):
    """The issue's case: an operator allowed only to read must be able to list, even on the table
    a deploy leaves (no ``#meta`` item yet)."""
    table, stack = stack_table(clients)
    calls = read_commands(hexeract, table, stack, backend, queue, recorder)
    writes = [str(c) for c in calls if c.action in DYNAMODB_WRITE_ACTIONS]
    assert writes == [], "read commands wrote:\n" + "\n".join(writes)
    policy = load_policy("ReadOnlyPolicy", table, stack)
    assert [str(c) for c in calls if not policy.allows(c)] == []


# -- operator ----------------------------------------------------------------------------------


def test_the_operator_policy_allows_every_write_command_and_grants_no_write_they_do_not_use(
    hexeract, backend: Backend, clients: ClientFactory, queue: Queue, recorder: Recorder
):
    table, stack = stack_table(clients)
    with recorder.recording():
        # the first command on the table a deploy leaves
        cron = ok(hexeract, table, "add", "--cron", "*/5 * * * *", "--target", queue.target).strip()
        assert f"paused {cron}" in ok(hexeract, table, "pause", cron, stack=stack)
        assert f"resumed {cron}" in ok(hexeract, table, "resume", cron)
        assert f"cancelled {cron}" in ok(hexeract, table, "cancel", cron)
        later = ok(hexeract, table, "add", "--at", "+1h", "--target", queue.target, "--payload", '{"n": 1}').strip()
        assert f"cancelled {later}" in ok(hexeract, table, "cancel", later)
    dead = dead_letter_one(hexeract, table, backend)  # the dispatcher's doing, not the operator's
    with recorder.recording():
        assert f"replayed {dead}" in ok(hexeract, table, "dead-letter", "replay", dead, stack=stack)

    policy = load_policy("OperatorPolicy", table, stack)
    refused = [str(c) for c in recorder.calls if not policy.allows(c)]
    assert refused == [], "\n".join(refused)
    # exactly: every write the policy grants is one these commands make
    granted_writes = {a for actions, _ in policy.statements for a in actions} & DYNAMODB_WRITE_ACTIONS
    used_writes = {c.action for c in recorder.calls} & DYNAMODB_WRITE_ACTIONS
    assert granted_writes == used_writes == CLI_WRITE_ACTIONS
    # and no write lands anywhere but the table's items
    assert all(c.resources == (table_arn(table),) for c in recorder.calls if c.action in CLI_WRITE_ACTIONS)


def test_the_resolved_policies_refuse_what_they_do_not_grant():
    """The matcher itself: a write, another table, an index write and another function are refused."""
    read_only = load_policy("ReadOnlyPolicy", "t")
    operator = load_policy("OperatorPolicy", "t")
    get = Call("dynamodb:GetItem", (table_arn("t"),))
    assert read_only.allows(get) and operator.allows(get)
    assert read_only.allows(Call("dynamodb:Query", (table_arn("t") + "/index/due-index",)))
    assert not read_only.allows(Call("dynamodb:GetItem", (table_arn("other"),)))
    assert not read_only.allows(Call("dynamodb:BatchGetItem", (table_arn("t"), table_arn("other"))))
    for write in ("dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"):
        assert not read_only.allows(Call(write, (table_arn("t"),))), write
    assert operator.allows(Call("dynamodb:UpdateItem", (table_arn("t"),)))
    assert not operator.allows(Call("dynamodb:DeleteItem", (table_arn("t"),)))
    assert not operator.allows(Call("dynamodb:PutItem", (table_arn("t") + "/index/due-index",)))
    assert operator.allows(Call("lambda:InvokeFunction", (DEAD_LETTER_FUNCTION_ARN,)))
    assert not read_only.allows(Call("lambda:InvokeFunction", (DEAD_LETTER_FUNCTION_ARN,)))
    assert not operator.allows(Call("lambda:InvokeFunction", (DEAD_LETTER_FUNCTION_ARN + "-other",)))
    describe = "cloudformation:DescribeStacks"
    assert read_only.allows(Call(describe, (stack_arn("the-stack"),))) and operator.allows(
        Call(describe, (stack_arn("the-stack"),))
    )
    assert not read_only.allows(Call(describe, (stack_arn("another-stack"),)))
