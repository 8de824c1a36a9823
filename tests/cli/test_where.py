"""Which table, and which AWS, a command talks to: ``--stack`` (the deployed stack's table, read from
its outputs), ``--table``, the missing-table advice, and missing credentials."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from click.testing import CliRunner

from hexeract_scheduler.aws.clients import ClientFactory
from hexeract_scheduler.aws.stack import TABLE_OUTPUT
from hexeract_scheduler.cli.commands import main

from ..conftest import Backend, dead_port, unique
from .test_cli import add, fails, ok
from .test_console_script import command

WAIT_HANDLE = {"Handle": {"Type": "AWS::CloudFormation::WaitConditionHandle"}}


def make_stack(clients: ClientFactory, outputs: dict[str, str]) -> str:
    """A CloudFormation stack on the moto endpoint with these outputs (and one inert resource)."""
    name = unique("stack")
    body = {"Resources": WAIT_HANDLE, "Outputs": {key: {"Value": value} for key, value in outputs.items()}}
    clients.cloudformation().create_stack(StackName=name, TemplateBody=json.dumps(body))
    return name


# -- --stack -----------------------------------------------------------------------------------


def test_stack_reads_the_table_from_the_stack_outputs(hexeract, clients, store, queue):
    stack = make_stack(clients, {TABLE_OUTPUT: store.table_name, "Other": "x"})
    sid = add(hexeract, "--at", "+1h", "--target", queue.target)  # through --table
    listed = ok(hexeract("scheduler", "list", "--format", "json", "--stack", stack, table=None))
    assert [i["schedule_id"] for i in json.loads(listed)] == [sid]
    # and from the environment
    info = ok(hexeract("scheduler", "inspect", sid, table=None, env={"HEXERACT_STACK": stack}))
    assert f"schedule id:   {sid}" in info
    later = ok(hexeract("scheduler", "add", "--at", "+2h", "--target", queue.target, "--stack", stack, table=None))
    assert store.inspect(later.strip()) is not None  # written to the stack's table


def test_stack_and_table_are_mutually_exclusive(hexeract):
    err = fails(hexeract("scheduler", "list", "--stack", "s", "--table", "t", table=None), code=2)
    assert "give at most one of --table (HEXERACT_TABLE) and --stack (HEXERACT_STACK)" in err
    err = fails(hexeract("scheduler", "list", "--stack", "s", table=None, env={"HEXERACT_TABLE": "t"}), code=2)
    assert "at most one of --table" in err


def test_table_create_refuses_a_stack(hexeract):
    """A deployed stack created its table; `table create` on it would only record a shard count."""
    err = fails(hexeract("scheduler", "table", "create", "--stack", "s", table=None), code=2)
    assert "table create takes --table, not --stack" in err
    err = fails(hexeract("scheduler", "table", "create", table=None, env={"HEXERACT_STACK": "s"}), code=2)
    assert "not --stack" in err


def test_an_unknown_stack_is_one_line(hexeract):
    name = unique("no-such-stack")
    err = fails(hexeract("scheduler", "list", "--stack", name, table=None))
    assert err.strip() == f"error: stack {name} does not exist in us-east-1"


def test_a_stack_without_the_table_output_is_one_line(hexeract, clients):
    stack = make_stack(clients, {"SomethingElse": "x"})
    err = fails(hexeract("scheduler", "list", "--stack", stack, table=None))
    assert err.startswith(f"error: stack {stack} (CREATE_COMPLETE) has no output {TABLE_OUTPUT}: "), err


def test_a_stack_whose_table_is_gone(hexeract, clients):
    gone = unique("deleted")
    stack = make_stack(clients, {TABLE_OUTPUT: gone})
    err = fails(hexeract("scheduler", "list", "--stack", stack, table=None))
    expected = f"error: table {gone} (output {TABLE_OUTPUT} of stack {stack}) does not exist: was it deleted?"
    assert err.strip() == expected


# -- the missing-table advice against AWS ------------------------------------------------------


def test_missing_table_against_aws_advises_stack_or_table_not_table_create(backend: Backend):
    """Against AWS (here: the standard endpoint variables, as a process would have them), a
    missing table is most likely a deployed stack's under another name: the advice is --stack or
    --table, and `table create` is named only as what it is (a new table no dispatcher reads)."""
    name = unique("absent")
    env = {**os.environ, **backend.env, "HEXERACT_CONN": "aws", "HEXERACT_TABLE": name}
    result = subprocess.run([*command(), "scheduler", "list"], env=env, capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stdout) == (1, ""), result.stderr
    assert result.stderr == (
        f"error: table {name} does not exist: name the deployed table with --stack NAME or --table NAME "
        "(env HEXERACT_STACK, HEXERACT_TABLE); `hexeract scheduler table create` makes a new table, "
        "which no deployed dispatcher reads\n"
    )


# -- no credentials ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "what"),
    [
        (["table", "create"], "creating table hexeract-schedules"),
        (["list"], "listing schedules in table hexeract-schedules"),
    ],
)
def test_no_credentials_is_one_line_telling_how_to_provide_them(no_credentials, args, what):
    result = CliRunner().invoke(main, ["scheduler", *args, "--conn", "aws"], catch_exceptions=False)
    err = fails(result)
    assert err.startswith(f"error: {what}: no usable AWS credentials (Unable to locate credentials): "), err
    assert "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY" in err
    assert err.rstrip().endswith("for a local endpoint, give --conn http://127.0.0.1:PORT")
    assert no_credentials == []  # no connection attempted at all


def test_no_credentials_in_the_console_script():
    """The same in a real process: no credential anywhere, no instance metadata, and an endpoint on
    a dead loopback port should anything be sent (nothing is: there is nothing to sign with)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env |= {
        "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
        "AWS_CONFIG_FILE": "/dev/null",
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{dead_port()}",
    }
    result = subprocess.run(
        [*command(), "scheduler", "list", "--conn", "aws"], env=env, capture_output=True, text=True, timeout=60
    )
    assert (result.returncode, result.stdout) == (1, ""), result.stderr
    assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr
    assert "no usable AWS credentials" in result.stderr and "--conn http://127.0.0.1:PORT" in result.stderr
