"""The IAM of template.yaml: no data action on every resource, the table and the targets as the only
resources, and the two operator policies (what the CLI really calls: test_operator_policies.py)."""

from __future__ import annotations

from typing import Any

from .conftest import CLI_WRITE_ACTIONS, DYNAMODB_WRITE_ACTIONS, all_statements, as_list, policy_statements

DATA_SERVICES = ("dynamodb:", "sqs:", "sns:", "kms:", "s3:")


def test_no_data_action_is_granted_on_every_resource(template):
    statements = list(all_statements(template))
    assert statements
    for name, stmt in statements:
        actions = as_list(stmt["Action"])
        assert "*" not in actions, name
        data = [a for a in actions if a.startswith(DATA_SERVICES)]
        assert not any(a.endswith(":*") for a in data), (name, actions)
        if data:
            for resource in as_list(stmt["Resource"]):
                assert resource != "*", (name, stmt)
                assert not (isinstance(resource, str) and resource.startswith("arn:") and resource.endswith(":*"))


def test_dynamodb_actions_are_scoped_to_the_table_and_its_indexes(template):
    allowed = [{"Fn::GetAtt": ["SchedulesTable", "Arn"]}, {"Fn::Sub": "${SchedulesTable.Arn}/index/*"}]
    for name, stmt in all_statements(template):
        if any(a.startswith("dynamodb:") for a in as_list(stmt["Action"])):
            assert all(r in allowed for r in as_list(stmt["Resource"])), (name, stmt)


def test_targets_come_from_parameters_and_the_demo_resources(template):
    allowed = [
        {"Ref": "TargetQueueArns"},
        {"Ref": "TargetTopicArns"},
        {"Fn::GetAtt": ["DemoQueue", "Arn"]},
        {"Ref": "DemoTopic"},
    ]
    granted = {a for _, s in all_statements(template) for a in as_list(s["Action"])}
    assert {"sqs:SendMessage", "sqs:GetQueueUrl", "sns:Publish"} <= granted
    for name, stmt in all_statements(template):
        if any(a.startswith(("sqs:", "sns:")) for a in as_list(stmt["Action"])):
            assert stmt["Resource"] in allowed, (name, stmt)
    for param in ("TargetQueueArns", "TargetTopicArns"):
        assert template["Parameters"][param]["Type"] == "CommaDelimitedList"


READ_ACTIONS = {"dynamodb:DescribeTable", "dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query"}


# `hexeract --stack NAME` reads the table's name from the stack's outputs, on this stack only.
STACK_READ = {"cloudformation:DescribeStacks"}


STACK_ARN = {"Ref": "AWS::StackId"}


TABLE_ARN = {"Fn::GetAtt": ["SchedulesTable", "Arn"]}


INDEX_ARNS = {"Fn::Sub": "${SchedulesTable.Arn}/index/*"}


def granted(template: dict[str, Any], policy: str) -> set[str]:
    return {a for s in policy_statements(template, policy) for a in as_list(s["Action"])}


def test_the_read_only_policy_grants_no_write(template):
    statements = policy_statements(template, "ReadOnlyPolicy")
    assert all(s["Effect"] == "Allow" and "Condition" not in s for s in statements)
    assert granted(template, "ReadOnlyPolicy") == READ_ACTIONS | STACK_READ
    assert not granted(template, "ReadOnlyPolicy") & DYNAMODB_WRITE_ACTIONS
    assert "lambda:InvokeFunction" not in granted(template, "ReadOnlyPolicy")  # replay is a write
    for stmt in statements:
        assert not any("*" in a for a in as_list(stmt["Action"])), stmt
        if set(as_list(stmt["Action"])) == STACK_READ:
            assert as_list(stmt["Resource"]) == [STACK_ARN], "only this stack's outputs"
        else:
            assert all(r in (TABLE_ARN, INDEX_ARNS) for r in as_list(stmt["Resource"])), stmt


def test_the_operator_policy_grants_reads_and_exactly_the_cli_writes(template):
    statements = policy_statements(template, "OperatorPolicy")
    assert granted(template, "OperatorPolicy") == READ_ACTIONS | STACK_READ | CLI_WRITE_ACTIONS | {
        "lambda:InvokeFunction"
    }
    assert granted(template, "OperatorPolicy") & DYNAMODB_WRITE_ACTIONS == CLI_WRITE_ACTIONS
    for stmt in statements:
        actions = set(as_list(stmt["Action"]))
        if actions & CLI_WRITE_ACTIONS:
            assert as_list(stmt["Resource"]) == [TABLE_ARN], "writes go to the table's items, nowhere else"
        if "lambda:InvokeFunction" in actions:
            assert actions == {"lambda:InvokeFunction"}
            assert as_list(stmt["Resource"]) == [{"Fn::GetAtt": ["DeadLetterFunction", "Arn"]}]
    # read-only plus: every read grant of the read-only policy is in the operator one
    reads = [s for s in statements if set(as_list(s["Action"])) <= READ_ACTIONS | STACK_READ]
    assert reads == policy_statements(template, "ReadOnlyPolicy")
