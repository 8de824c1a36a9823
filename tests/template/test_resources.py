"""The stores of template.yaml: the schedules table as the code defines it, encrypted queues and
topics, optional demo targets."""

from __future__ import annotations

from typing import Any

from hexeract_scheduler.store.dynamo import table_definition

from .conftest import resources


def _sorted(items: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    return sorted(items, key=lambda i: i[key])


def test_the_table_is_the_one_table_definition_describes(template):
    table = template["Resources"]["SchedulesTable"]
    assert table["Type"] == "AWS::DynamoDB::Table"
    props = table["Properties"]
    want = table_definition()
    assert props["BillingMode"] == want["BillingMode"] == "PAY_PER_REQUEST"
    assert props["KeySchema"] == want["KeySchema"]
    assert _sorted(props["AttributeDefinitions"], "AttributeName") == _sorted(
        want["AttributeDefinitions"], "AttributeName"
    )
    got_gsis = {g["IndexName"]: g for g in props["GlobalSecondaryIndexes"]}
    want_gsis = {g["IndexName"]: g for g in want["GlobalSecondaryIndexes"]}
    assert got_gsis == want_gsis
    # The due index carries leased_until (a claim updates its entry in place); the other, keys only.
    assert got_gsis["due-index-v2"]["Projection"] == {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["leased_until"]}
    assert got_gsis["dead-letter-index"]["Projection"] == {"ProjectionType": "KEYS_ONLY"}
    assert props["SSESpecification"] == {"SSEEnabled": True}
    assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert props["DeletionProtectionEnabled"] == {"Ref": "DeletionProtection"}


def test_every_queue_and_topic_is_encrypted(template):
    queues = resources(template, "AWS::SQS::Queue")
    topics = resources(template, "AWS::SNS::Topic")
    assert queues and topics  # the demo targets, at least
    for name, queue in queues.items():
        props = queue["Properties"]
        assert props.get("SqsManagedSseEnabled") is True or props.get("KmsMasterKeyId"), f"{name} is not encrypted"
    for name, topic in topics.items():
        assert topic["Properties"].get("KmsMasterKeyId"), f"{name} is not encrypted"
    assert template["Resources"]["DemoTopic"]["Properties"]["KmsMasterKeyId"] == "alias/aws/sns"
    # No other resource type creates a queue or a topic.
    kinds = {r["Type"] for r in template["Resources"].values()}
    assert {k for k in kinds if k.startswith(("AWS::SQS::", "AWS::SNS::"))} <= {"AWS::SQS::Queue", "AWS::SNS::Topic"}


def test_demo_targets_are_optional(template):
    for name in ("DemoQueue", "DemoTopic"):
        assert template["Resources"][name]["Condition"] == "CreateDemo"
    assert template["Conditions"]["CreateDemo"] == {"Fn::Equals": [{"Ref": "CreateDemoTargets"}, "true"]}
