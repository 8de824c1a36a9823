"""A deployed stack's schedules table: its name, read from the stack's outputs (CloudFormation
DescribeStacks), so that tools address the table the dispatcher reads and never guess one."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from hexeract_scheduler.aws.translate import aws_errors, error_code
from hexeract_scheduler.errors import ConfigError

# template.yaml's output holding the table's name (tests/template/test_outputs.py checks it is there).
TABLE_OUTPUT = "SchedulesTableName"


class StackNotFound(ConfigError):
    """No stack of that name in the region the connection points at."""


def stack_table_name(cloudformation: Any, stack: str) -> str:
    """The schedules table of ``stack`` (its ``SchedulesTableName`` output).

    Raises ``StackNotFound`` for an unknown stack and ``ConfigError`` for a stack without that
    output (not a hexeract-scheduler stack, or one whose creation failed); AWS errors are
    translated as for every other call."""
    region = getattr(getattr(cloudformation, "meta", None), "region_name", None)
    where = f" in {region}" if region else ""
    with aws_errors(f"reading the outputs of stack {stack}"):
        try:
            stacks = cloudformation.describe_stacks(StackName=stack).get("Stacks", [])
        except ClientError as exc:
            message = str(exc.response.get("Error", {}).get("Message", ""))
            if error_code(exc) == "ValidationError" and "does not exist" in message:
                raise StackNotFound(f"stack {stack} does not exist{where}") from None
            raise
    if not stacks:
        raise StackNotFound(f"stack {stack} does not exist{where}")
    found = stacks[0]
    outputs = {o.get("OutputKey"): o.get("OutputValue") for o in found.get("Outputs") or []}
    name = outputs.get(TABLE_OUTPUT)
    if not name:
        status = found.get("StackStatus", "unknown status")
        raise ConfigError(
            f"stack {stack} ({status}) has no output {TABLE_OUTPUT}: not a hexeract-scheduler stack, "
            "or one not deployed yet; name the table itself instead"
        )
    return str(name)
