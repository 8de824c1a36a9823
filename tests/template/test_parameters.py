"""The guided deploy: every parameter grouped, labelled and described, declared in the order of its
group, and the rule that refuses a stack with no target."""

from __future__ import annotations

from typing import Any

from .conftest import evaluate_rule, parameter_values, refs

FIRST_GROUP = ["TargetQueueArns", "TargetTopicArns", "CreateDemoTargets", "AlarmTopicArn", "LagAlarmThresholdMs"]


def interface(template: dict[str, Any]) -> dict[str, Any]:
    return template["Metadata"]["AWS::CloudFormation::Interface"]  # type: ignore[no-any-return]


def test_every_parameter_is_in_exactly_one_group_with_a_label_and_a_description(template):
    params = template["Parameters"]
    groups = interface(template)["ParameterGroups"]
    labels = interface(template)["ParameterLabels"]
    grouped = [name for group in groups for name in group["Parameters"]]
    assert sorted(grouped) == sorted(params), "each parameter in exactly one group, and only parameters"
    for group in groups:
        assert set(group) == {"Label", "Parameters"} and group["Parameters"], group
        assert isinstance(group["Label"]["default"], str) and group["Label"]["default"].strip(), group
    assert set(labels) == set(params)
    for name, param in params.items():
        label = labels[name]["default"]
        assert set(labels[name]) == {"default"} and isinstance(label, str) and label.strip(), name
        description = param.get("Description")
        assert isinstance(description, str) and len(description) >= 40, f"{name}: no real Description"
        assert len(description) <= 4000 and "\n" not in description, name  # CloudFormation's limit; one paragraph
        # the default's meaning and the accepted values are in the description
        assert "default" in description.lower(), f"{name}: the Description does not say what the default means"
        if param["Type"] == "Number" and "MaxValue" in param:
            assert f"{param['MinValue']}-{param['MaxValue']}" in description, f"{name}: range not described"


def test_targets_and_alarms_come_first_and_internals_last(template):
    groups = interface(template)["ParameterGroups"]
    assert groups[0]["Parameters"] == FIRST_GROUP
    assert [g["Parameters"][0] for g in groups[1:3]] == ["TableName", "DispatchMode"]
    assert "internals" in groups[-1]["Label"]["default"]
    assert {"BatchSize", "LeaseSeconds", "Concurrency", "PollIntervalMs"} <= set(groups[-1]["Parameters"])


def test_the_parameters_are_declared_in_the_order_of_their_groups(template):
    """``sam deploy --guided`` ignores the Interface metadata: it asks every parameter, by name, in
    the order of the Parameters section (samcli/commands/deploy/guided_context.py). Declaring them
    in group order is what puts the targets and alarms first there too."""
    grouped = [name for group in interface(template)["ParameterGroups"] for name in group["Parameters"]]
    assert list(template["Parameters"]) == grouped


def test_a_stack_with_no_target_is_refused_unless_it_asks_for_the_demo_targets(template):
    rules = template["Rules"]
    name = "AtLeastOneTarget"
    assert len(rules[name]["Assertions"]) == 1
    assertion = rules[name]["Assertions"][0]
    assert "RuleCondition" not in rules[name]  # always applies
    assert refs(assertion["Assert"]) == {"TargetQueueArns", "TargetTopicArns", "CreateDemoTargets"}
    message = assertion["AssertDescription"]
    assert "\n" not in message and len(message) <= 200
    for param in ("TargetQueueArns", "TargetTopicArns", "CreateDemoTargets"):
        assert param in message

    def accepted(**overrides: str) -> bool:
        return bool(evaluate_rule(assertion["Assert"], parameter_values(template, **overrides)))

    queue = "arn:aws:sqs:eu-west-1:123456789012:orders"
    topic = "arn:aws:sns:eu-west-1:123456789012:reminders"
    assert not accepted(), "every default accepted must not make a stack that can send to nothing"
    assert not accepted(TargetQueueArns=",", TargetTopicArns="")
    assert accepted(TargetQueueArns=queue)
    assert accepted(TargetTopicArns=topic)
    assert accepted(TargetQueueArns=f"{queue},{queue}.fifo", TargetTopicArns=topic)
    assert accepted(CreateDemoTargets="true")
    # an empty list however CloudFormation represents it
    assert not evaluate_rule(assertion["Assert"], {**parameter_values(template), "TargetQueueArns": []})
