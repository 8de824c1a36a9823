"""template.yaml against the code: handlers, configuration, table, IAM, alarms, coverage arithmetic,
the dispatcher slots (one per DispatcherShardRanges entry) and the two dispatch modes."""

from __future__ import annotations

import importlib
import json
import logging
import math
import re
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hexeract_scheduler.dynamo import table_definition
from hexeract_scheduler.lambda_ops import ON_DEMAND_OVERLAP_SECONDS, parse_dead_letter_request
from hexeract_scheduler.settings import BOUNDS, ENV_VARS, ON_DEMAND, SCHEDULER_DELIVERY_WINDOW_SECONDS, Settings
from hexeract_scheduler.shards import MAX_DISPATCHER_RANGES, MAX_SHARDS, parse_shard_ranges
from hexeract_scheduler.stack import TABLE_OUTPUT

from hexeract_scheduler import observability
from hexeract_scheduler.errors import ConfigError
from tools import dispatcher_slots

from .cfn_eval import Stack

ROOT = Path(__file__).resolve().parents[1]
DATA_SERVICES = ("dynamodb:", "sqs:", "sns:", "kms:", "s3:")


class CfnLoader(yaml.SafeLoader):
    """A YAML loader that turns CloudFormation short-form tags into their long form."""


def _cfn_tag(loader: CfnLoader, suffix: str, node: yaml.Node) -> dict[str, Any]:
    if isinstance(node, yaml.ScalarNode):
        value: Any = loader.construct_scalar(node)
        if suffix == "GetAtt":
            value = value.split(".", 1)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]
    return {"Ref" if suffix == "Ref" else f"Fn::{suffix}": value}


CfnLoader.add_multi_constructor("!", _cfn_tag)


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return yaml.load((ROOT / "template.yaml").read_text(), Loader=CfnLoader)  # a SafeLoader


def resources(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {name: r for name, r in template["Resources"].items() if r["Type"] == kind}


def default(template: dict[str, Any], param: str) -> Any:
    return template["Parameters"][param]["Default"]


# Slot k's function: DispatcherFunction for the first (the name of the single dispatcher of earlier
# versions), Dispatcher<k>Function for the others (tools/dispatcher_slots.py).
def dispatcher(k: int) -> str:
    return "DispatcherFunction" if k == 1 else f"Dispatcher{k}Function"


DISPATCHERS = [dispatcher(k) for k in range(1, MAX_DISPATCHER_RANGES + 1)]


def global_env(template: dict[str, Any]) -> dict[str, Any]:
    return template["Globals"]["Function"]["Environment"]["Variables"]  # type: ignore[no-any-return]


# -- functions ---------------------------------------------------------------------------------


@pytest.fixture
def template_env(template: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """The process environment the deployed dispatcher gets with the default parameters."""
    env = Stack(template).environment("DispatcherFunction")
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    yield env


@pytest.fixture
def _core_logger_restored() -> Iterator[None]:
    """Importing a handler wires the core logger to Powertools (no propagation): undo that."""
    core = logging.getLogger("hexeract_scheduler")
    saved = (list(core.handlers), core.propagate, core.level)
    yield
    core.handlers[:], core.propagate = saved[0], saved[1]
    core.setLevel(saved[2])


@pytest.mark.usefixtures("_core_logger_restored")
def test_every_function_resolves_to_an_importable_lambda_handler(template, template_env):
    functions = resources(template, "AWS::Serverless::Function")
    assert set(functions) == {*DISPATCHERS, "DeadLetterFunction"}
    for name, fn in functions.items():
        props = fn["Properties"]
        code = ROOT / props["CodeUri"]
        module_name, _, attr = props["Handler"].rpartition(".")
        assert (code / f"{module_name}.py").is_file(), name
        dotted = ".".join((*code.relative_to(ROOT).parts, module_name))
        # Import as the deployed function would: built from the template's default configuration.
        module = importlib.reload(sys.modules[dotted]) if dotted in sys.modules else importlib.import_module(dotted)
        assert callable(getattr(module, attr)), f"{name}: {props['Handler']}"
        if hasattr(module, "worker"):
            module.worker.close()


def test_functions_run_python_312_or_newer_on_arm64_with_the_core_layer(template):
    glob = template["Globals"]["Function"]
    runtime = glob["Runtime"]
    assert runtime.startswith("python3.") and int(runtime.split(".")[1]) >= 12
    assert glob["Architectures"] == ["arm64"]
    assert glob["Layers"] == [{"Ref": "CoreLayer"}]
    for name, fn in resources(template, "AWS::Serverless::Function").items():
        for key in ("Runtime", "Architectures", "Layers"):
            assert key not in fn["Properties"], f"{name} overrides Globals.{key}"

    layer = template["Resources"]["CoreLayer"]
    assert layer["Type"] == "AWS::Serverless::LayerVersion"
    assert layer["Properties"]["ContentUri"].rstrip("/") == "layers/core"
    assert layer["Metadata"]["BuildMethod"] == runtime
    assert runtime in layer["Properties"]["CompatibleRuntimes"]
    assert (ROOT / "layers/core/requirements.txt").is_file()
    assert (ROOT / "layers/core/hexeract_scheduler/__init__.py").is_file()


# -- configuration -----------------------------------------------------------------------------


def test_globals_declare_exactly_the_variables_settings_reads(template):
    assert set(global_env(template)) == set(ENV_VARS.values())
    for name, fn in resources(template, "AWS::Serverless::Function").items():
        overrides = set(fn["Properties"].get("Environment", {}).get("Variables", {}))
        assert overrides <= {"DISPATCHER_SHARDS"}, f"{name} declares configuration outside Globals: {overrides}"


def test_the_default_parameters_make_a_valid_configuration(template, template_env):
    settings = Settings.from_env(template_env)
    assert settings.table_name == "schedulestable-from-template"
    settings.worker_config()


def test_numeric_parameters_stay_within_the_bounds_settings_accept(template):
    """CloudFormation refuses at deploy time what the cold start would refuse (README#configuration)."""
    by_var = {var: field for field, var in ENV_VARS.items()}
    checked = set()
    for var, value in global_env(template).items():
        field = by_var[var]
        if field not in BOUNDS:
            continue
        bound = BOUNDS[field]
        # A mode-dependent value (Fn::If [OnDemand, literal, !Ref Parameter]): both branches.
        branches = value["Fn::If"][1:] if isinstance(value, dict) and "Fn::If" in value else [value]
        for branch in branches:
            if not (isinstance(branch, dict) and set(branch) == {"Ref"}):
                assert bound.accepts(branch), (var, branch, bound)
                continue
            param = template["Parameters"][branch["Ref"]]
            assert param["Type"] == "Number", var
            assert "MaxValue" in param, f"{branch['Ref']} has no MaxValue"
            least, most = float(param["MinValue"]), float(param["MaxValue"])
            assert least > bound.least if bound.open_least else least >= bound.least, (var, least, bound)
            assert most <= bound.most, (var, most, bound)
            assert bound.accepts(int(param["Default"])), (var, param["Default"])
            checked.add(field)
    assert checked == set(BOUNDS)


def test_the_shard_ranges_parameter_refuses_entries_settings_would_refuse(template):
    """CloudFormation applies a CommaDelimitedList's AllowedPattern to each entry."""
    param = template["Parameters"]["DispatcherShardRanges"]
    assert param["Type"] == "CommaDelimitedList" and param["Default"] == "all"
    pattern = param["AllowedPattern"]
    for ok in ("all", "0-3", "3", "0-0", f"0-{MAX_SHARDS - 1}", "128-255", "10", "99-100"):
        assert re.fullmatch(pattern, ok), ok
        parse_shard_ranges(ok)  # what the cold start reads
    for bad in ("", "0-300000000", "256", "1000", "0-256", "0-", "-1", "x", "0,2", "0-1-2", " 1", "*", "ALL"):
        assert not re.fullmatch(pattern, bad), bad


def test_the_default_parameters_keep_dispatcher_runs_overlapping(template):
    """The coverage arithmetic written in template.yaml and docs/deploy.md, on the defaults
    (continuous mode)."""
    period = int(default(template, "DispatchPeriodMinutes")) * 60
    run = float(default(template, "RunSeconds"))
    margin = float(default(template, "StopMarginSeconds"))
    dispatch_timeout = float(default(template, "DispatchTimeoutSeconds"))
    timeout = int(default(template, "DispatcherTimeout"))
    lease = int(default(template, "LeaseSeconds"))
    batch = int(default(template, "BatchSize"))
    cold_start = 5

    # Runs overlap even when one starts early and the next a whole delivery window late.
    assert run - dispatch_timeout >= period + SCHEDULER_DELIVERY_WINDOW_SECONDS
    # A run fits its invocation, with the margin to settle the last batch.
    assert timeout >= run + margin + cold_start
    # A batch's settle fits its lease.
    assert lease >= batch * dispatch_timeout
    # Enough concurrency for the overlapping runs (starts at least period - window apart).
    overlapping = math.ceil((run + margin) / (period - SCHEDULER_DELIVERY_WINDOW_SECONDS))
    assert int(default(template, "DispatcherReservedConcurrency")) >= overlapping

    stack = Stack(template)
    for name in DISPATCHERS[:1]:
        props = stack.resources[name]["Properties"]
        assert int(props["Timeout"]) == timeout
        assert props["ReservedConcurrentExecutions"] == str(default(template, "DispatcherReservedConcurrency"))
        assert props["Events"]["Every"]["Properties"]["ScheduleExpression"] == f"rate({period // 60} minutes)"
        settings = Settings.from_env(stack.environment(name))
        assert (settings.run_seconds, settings.dispatch_period_minutes) == (run, period // 60)
        assert not settings.on_demand


def test_on_demand_runs_reach_the_next_start_within_their_invocation(template):
    """On-demand mode: a run every minute, staying while something is due before the latest next
    start (its scheduled start + one period + the 60 s window) and one dispatch timeout and a small
    overlap more; the template's fixed RUN_SECONDS and Timeout for the mode must allow that."""
    stack = Stack(template, DispatchMode=ON_DEMAND)
    env = stack.environment("DispatcherFunction")
    props = stack.resources["DispatcherFunction"]["Properties"]
    settings = Settings.from_env(env)  # the cold start's own check of the same inequality
    assert settings.on_demand and settings.dispatch_period_minutes == 1
    assert props["Events"]["Every"]["Properties"]["ScheduleExpression"] == "rate(1 minute)"
    period = 60
    run, margin = settings.run_seconds, settings.stop_margin_seconds
    dispatch_timeout = settings.dispatch_timeout_seconds
    cold_start = 5
    # The longest an on-demand run stays: invoked on time, something due just before the latest next start.
    stay = period + SCHEDULER_DELIVERY_WINDOW_SECONDS + dispatch_timeout + ON_DEMAND_OVERLAP_SECONDS
    assert run >= stay - ON_DEMAND_OVERLAP_SECONDS  # a batch claimed at the next start still fits
    assert int(props["Timeout"]) >= run + margin + cold_start
    assert props["EventInvokeConfig"]["MaximumEventAgeInSeconds"] == 60  # a retry older than a period is moot
    # Runs alive at once: those whose scheduled start is within the longest stay (+ the hard deadline).
    overlapping = math.floor((stay + margin / 2) / period) + 1
    assert overlapping == 3 <= int(default(template, "DispatcherReservedConcurrency"))
    # The largest DispatchTimeoutSeconds on-demand mode accepts, as docs/deploy.md says.
    assert run - period - SCHEDULER_DELIVERY_WINDOW_SECONDS == 120


def test_the_schedule_sends_the_sample_event(template):
    sample = json.loads((ROOT / "events/dispatcher.json").read_text())
    for k, name in enumerate(DISPATCHERS, 1):
        schedule = template["Resources"][name]["Properties"]["Events"]["Every"]
        assert schedule["Type"] == "ScheduleV2"
        props = schedule["Properties"]
        assert props["FlexibleTimeWindow"] == {"Mode": "OFF"}
        assert props["ScheduleExpression"] == {
            "Fn::If": ["OnDemand", "rate(1 minute)", {"Fn::Sub": "rate(${DispatchPeriodMinutes} minutes)"}]
        }
        sent = json.loads(props["Input"])
        assert set(sent) == set(sample)
        assert sent["dispatcher"] == str(k)
    assert sample["dispatcher"] == "1"


def test_the_sample_dead_letter_events_are_valid_requests():
    for name in ("dead_letter_list.json", "dead_letter_replay.json"):
        parse_dead_letter_request(json.loads((ROOT / "events" / name).read_text()))


# -- table -------------------------------------------------------------------------------------


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


# -- IAM ---------------------------------------------------------------------------------------


def _statements(template: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every policy statement, inline or managed, with !If branches unfolded."""

    def unfold(stmt: Any) -> Iterator[dict[str, Any]]:
        if isinstance(stmt, dict) and "Fn::If" in stmt:
            for branch in stmt["Fn::If"][1:]:
                yield from unfold(branch)
        elif isinstance(stmt, dict) and "Effect" in stmt:
            yield stmt

    for name, res in template["Resources"].items():
        docs = []
        props = res.get("Properties", {})
        if res["Type"] == "AWS::IAM::ManagedPolicy":
            docs.append(props["PolicyDocument"])
        for policy in props.get("Policies", []) if isinstance(props.get("Policies"), list) else []:
            if isinstance(policy, dict) and "Statement" in policy:
                docs.append(policy)
        for doc in docs:
            for stmt in doc["Statement"]:
                for s in unfold(stmt):
                    yield name, s


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def test_no_data_action_is_granted_on_every_resource(template):
    statements = list(_statements(template))
    assert statements
    for name, stmt in statements:
        actions = _as_list(stmt["Action"])
        assert "*" not in actions, name
        data = [a for a in actions if a.startswith(DATA_SERVICES)]
        assert not any(a.endswith(":*") for a in data), (name, actions)
        if data:
            for resource in _as_list(stmt["Resource"]):
                assert resource != "*", (name, stmt)
                assert not (isinstance(resource, str) and resource.startswith("arn:") and resource.endswith(":*"))


def test_dynamodb_actions_are_scoped_to_the_table_and_its_indexes(template):
    allowed = [{"Fn::GetAtt": ["SchedulesTable", "Arn"]}, {"Fn::Sub": "${SchedulesTable.Arn}/index/*"}]
    for name, stmt in _statements(template):
        if any(a.startswith("dynamodb:") for a in _as_list(stmt["Action"])):
            assert all(r in allowed for r in _as_list(stmt["Resource"])), (name, stmt)


def test_targets_come_from_parameters_and_the_demo_resources(template):
    allowed = [
        {"Ref": "TargetQueueArns"},
        {"Ref": "TargetTopicArns"},
        {"Fn::GetAtt": ["DemoQueue", "Arn"]},
        {"Ref": "DemoTopic"},
    ]
    granted = {a for _, s in _statements(template) for a in _as_list(s["Action"])}
    assert {"sqs:SendMessage", "sqs:GetQueueUrl", "sns:Publish"} <= granted
    for name, stmt in _statements(template):
        if any(a.startswith(("sqs:", "sns:")) for a in _as_list(stmt["Action"])):
            assert stmt["Resource"] in allowed, (name, stmt)
    for param in ("TargetQueueArns", "TargetTopicArns"):
        assert template["Parameters"][param]["Type"] == "CommaDelimitedList"


# -- alarms and outputs ------------------------------------------------------------------------


def test_alarms_watch_metrics_the_dispatcher_emits(template):
    alarms = resources(template, "AWS::CloudWatch::Alarm")
    by_metric = {a["Properties"]["MetricName"]: a["Properties"] for a in alarms.values()}
    assert {"DeadLettered", "FailedCycles", "Quarantined", "Unreadable", "DispatchLagMs", "Errors"} <= set(by_metric)
    emitted = set(observability.COUNT_METRICS) | {observability.LAG_METRIC}
    for props in alarms.values():
        p = props["Properties"]
        if p["Namespace"] in ("AWS/Lambda", "AWS/SQS"):  # AWS's own metrics
            continue
        assert p["MetricName"] in emitted
        assert p["Namespace"] == {"Ref": "MetricsNamespace"}
        # Powertools adds the "service" dimension to every metric: the alarm must ask for it.
        assert p["Dimensions"] == [{"Name": "service", "Value": {"Ref": "ServiceName"}}]
    assert by_metric["DispatchLagMs"]["Statistic"] == "Maximum"
    assert by_metric["DispatchLagMs"]["Threshold"] == {"Ref": "LagAlarmThresholdMs"}
    assert by_metric["DeadLettered"]["Threshold"] == 0
    assert by_metric["DeadLettered"]["ComparisonOperator"] == "GreaterThanThreshold"
    for k, name in enumerate(DISPATCHERS, 1):
        prefix = name.removesuffix("Function")
        errors = template["Resources"][f"{prefix}ErrorsAlarm"]["Properties"]
        assert (errors["Namespace"], errors["MetricName"]) == ("AWS/Lambda", "Errors")
        assert errors["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": name}}]
        started = template["Resources"][f"{prefix}NotStartedAlarm"]["Properties"]
        assert (started["Namespace"], started["MetricName"], started["Statistic"]) == (
            "AWS/Lambda",
            "Invocations",
            "Sum",
        )
        assert started["Dimensions"] == errors["Dimensions"]
        assert (started["Threshold"], started["ComparisonOperator"]) == (1, "LessThanThreshold")
        assert started["TreatMissingData"] == "breaching"  # no invocation, no datapoint
        # Longer than the longest gap between two starts: the period and the 60 s window.
        longest_period = int(template["Parameters"]["DispatchPeriodMinutes"]["MaxValue"]) * 60
        assert started["Period"] == {"Fn::If": ["OnDemand", 300, 900]}
        assert (
            longest_period + SCHEDULER_DELIVERY_WINDOW_SECONDS <= 900 and 60 + SCHEDULER_DELIVERY_WINDOW_SECONDS <= 300
        )
        assert k == 1 or template["Resources"][f"{prefix}NotStartedAlarm"]["Condition"] == f"HasDispatcher{k}"


def test_outputs_name_the_table_and_the_functions(template):
    outputs = template["Outputs"]
    assert outputs["SchedulesTableName"]["Value"] == {"Ref": "SchedulesTable"}
    for fn in (*DISPATCHERS, "DeadLetterFunction"):
        assert outputs[f"{fn}Name"]["Value"] == {"Ref": fn}
        assert outputs[f"{fn}Arn"]["Value"] == {"Fn::GetAtt": [fn, "Arn"]}
        assert outputs[f"{fn}Name"].get("Condition") == template["Resources"][fn].get("Condition")
        assert outputs[f"{fn}Arn"].get("Condition") == template["Resources"][fn].get("Condition")
    assert outputs["DispatcherRanges"]["Value"] == {"Fn::Join": [",", {"Ref": "DispatcherShardRanges"}]}


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


# -- guided deploy: parameters, groups, the target rule ----------------------------------------

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


def evaluate_rule(expr: Any, values: dict[str, Any]) -> Any:
    """A rule condition or assertion evaluated as CloudFormation does, with the parameter values given
    (a CommaDelimitedList's value is the list CloudFormation splits it into: "" is [""])."""
    if isinstance(expr, dict) and len(expr) == 1:
        ((fn, args),) = expr.items()
        if fn == "Ref":
            return values[args]
        ev = [evaluate_rule(a, values) for a in _as_list(args)]
        if fn == "Fn::Or":
            return any(ev)
        if fn == "Fn::And":
            return all(ev)
        if fn == "Fn::Not":
            return not ev[0]
        if fn == "Fn::Equals":
            return ev[0] == ev[1]
        if fn == "Fn::EachMemberEquals":
            return all(member == ev[1] for member in ev[0])
        if fn == "Fn::Contains":
            return ev[1] in ev[0]
        raise AssertionError(f"{fn} is not a rule function this test knows")
    if isinstance(expr, list):
        return [evaluate_rule(e, values) for e in expr]
    return expr


def _refs(node: Any) -> set[str]:
    if isinstance(node, dict):
        found = {node["Ref"]} if set(node) == {"Ref"} else set()
        return found.union(*(_refs(v) for v in node.values()))
    if isinstance(node, list):
        return set().union(*(_refs(v) for v in node))
    return set()


def _parameter_values(template: dict[str, Any], **overrides: str) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name, param in template["Parameters"].items():
        raw = overrides.get(name, str(param["Default"]))
        values[name] = raw.split(",") if param["Type"] == "CommaDelimitedList" else raw
    return values


def test_a_stack_with_no_target_is_refused_unless_it_asks_for_the_demo_targets(template):
    rules = template["Rules"]
    name = "AtLeastOneTarget"
    assert len(rules[name]["Assertions"]) == 1
    assertion = rules[name]["Assertions"][0]
    assert "RuleCondition" not in rules[name]  # always applies
    assert _refs(assertion["Assert"]) == {"TargetQueueArns", "TargetTopicArns", "CreateDemoTargets"}
    message = assertion["AssertDescription"]
    assert "\n" not in message and len(message) <= 200
    for param in ("TargetQueueArns", "TargetTopicArns", "CreateDemoTargets"):
        assert param in message

    def accepted(**overrides: str) -> bool:
        return bool(evaluate_rule(assertion["Assert"], _parameter_values(template, **overrides)))

    queue = "arn:aws:sqs:eu-west-1:123456789012:orders"
    topic = "arn:aws:sns:eu-west-1:123456789012:reminders"
    assert not accepted(), "every default accepted must not make a stack that can send to nothing"
    assert not accepted(TargetQueueArns=",", TargetTopicArns="")
    assert accepted(TargetQueueArns=queue)
    assert accepted(TargetTopicArns=topic)
    assert accepted(TargetQueueArns=f"{queue},{queue}.fifo", TargetTopicArns=topic)
    assert accepted(CreateDemoTargets="true")
    # an empty list however CloudFormation represents it
    assert not evaluate_rule(assertion["Assert"], {**_parameter_values(template), "TargetQueueArns": []})


# -- one dispatcher per shard range -------------------------------------------------------------

QUEUE = "arn:aws:sqs:eu-west-1:123456789012:orders"


def test_the_dispatcher_slots_are_the_generated_ones():
    """tools/dispatcher_slots.py writes the slots; the template holds exactly what it writes."""
    text = (ROOT / "template.yaml").read_text()
    assert dispatcher_slots.render(text) == text, "run python tools/dispatcher_slots.py"
    assert dispatcher_slots.main(["--check"]) == 0


@pytest.mark.parametrize(
    ("ranges", "shard_count"),
    [
        ("all", "4"),
        ("0-1,2-3", "4"),
        ("0,1,2-2,3", "4"),
        ("0-9,10-19,20-29,30-39", "40"),
        (",".join(f"{32 * k}-{32 * k + 31}" for k in range(MAX_DISPATCHER_RANGES)), "256"),
    ],
)
@pytest.mark.parametrize("mode", ["continuous", ON_DEMAND])
def test_each_range_gets_a_dispatcher_with_its_schedule_alarms_and_concurrency(template, ranges, shard_count, mode):
    """The stack CloudFormation would create from these parameters: as many dispatchers as ranges,
    each reading its range, started by its own schedule, watched by its own alarms, with its own
    reserved concurrency and log group, and the same IAM whatever the count."""
    entries = ranges.split(",")
    stack = Stack(
        template, DispatcherShardRanges=ranges, ShardCount=shard_count, DispatchMode=mode, TargetQueueArns=QUEUE
    )
    functions = {n: f for n, f in stack.of_type("AWS::Serverless::Function").items() if n != "DeadLetterFunction"}
    assert list(functions) == DISPATCHERS[: len(entries)]
    alarms = stack.of_type("AWS::CloudWatch::Alarm")
    log_groups, read = set(), []
    for k, (name, fn) in enumerate(functions.items(), 1):
        props = fn["Properties"]
        env = stack.environment(name)
        assert env["DISPATCHER_SHARDS"] == entries[k - 1]
        assert env["DISPATCHER_SHARD_RANGES"] == ranges
        settings = Settings.from_env(env)  # every cold-start check passes, the ranges' split included
        assert settings.on_demand == (mode == ON_DEMAND)
        read.extend(settings.dispatcher_shards or range(int(shard_count)))
        # its own schedule, sending its number
        schedule = props["Events"]["Every"]
        assert schedule["Type"] == "ScheduleV2"
        assert json.loads(schedule["Properties"]["Input"])["dispatcher"] == str(k)
        expected_rate = (
            "rate(1 minute)" if mode == ON_DEMAND else f"rate({default(template, 'DispatchPeriodMinutes')} minutes)"
        )
        assert schedule["Properties"]["ScheduleExpression"] == expected_rate
        # its own reserved concurrency and log group
        assert props["ReservedConcurrentExecutions"] == str(default(template, "DispatcherReservedConcurrency"))
        log_group = stack.resources[props["LoggingConfig"]["LogGroup"]["Ref"]]
        log_groups.add(log_group["Properties"]["LogGroupName"])
        # its own alarms: failures, and no start for longer than a period
        dimension = {"Name": "FunctionName", "Value": {"Ref": name}}
        watching = [a["Properties"] for a in alarms.values() if dimension in a["Properties"].get("Dimensions", [])]
        assert sorted(a["MetricName"] for a in watching) == ["Errors", "Invocations"]
        assert all(a["AlarmActions"] == alarms["DeadLetteredAlarm"]["Properties"]["AlarmActions"] for a in watching)
        # IAM: the one dispatcher policy, in a role SAM generates (with X-Ray, the failure queue)
        assert props["Policies"] == [{"Ref": "DispatcherPolicy"}] and "Role" not in props
        assert stack.outputs[f"{name}Name"]["Value"] == {"Ref": name}
    assert len(log_groups) == len(entries)
    assert sorted(read) == list(range(int(shard_count)))  # every shard read by exactly one dispatcher
    assert {o for o in stack.outputs if o.startswith("Dispatcher") and o.endswith("FunctionName")} == {
        f"{n}Name" for n in functions
    }
    assert stack.outputs["DispatcherRanges"]["Value"] == ranges
    # IAM unchanged: the same policies, word for word, as the one-dispatcher stack's
    single = Stack(template, TargetQueueArns=QUEUE, DispatchMode=mode)
    assert stack.of_type("AWS::IAM::ManagedPolicy") == single.of_type("AWS::IAM::ManagedPolicy")
    assert not stack.of_type("AWS::IAM::Role") and not stack.of_type("AWS::IAM::Policy")


@pytest.mark.parametrize(
    ("ranges", "shard_count", "message"),
    [
        ("0-1,1-3", "4", "ranges 1 and 2 overlap on shard 1"),
        ("0-1", "4", "no range covers shard(s) 2-3 of SHARD_COUNT=4"),
        ("0-1,2-3", "8", "no range covers shard(s) 4-7 of SHARD_COUNT=8"),
        ("0-3,4-5", "4", "range 2 (4-5) has shards beyond SHARD_COUNT=4 (0-3): 4-5"),
    ],
)
def test_ranges_that_do_not_split_the_shards_fail_every_dispatcher_at_cold_start(
    template, ranges, shard_count, message
):
    """CloudFormation cannot do the arithmetic; each dispatcher refuses to run at its cold start
    (DispatcherErrorsAlarm and the others fire) rather than leave shards unread or read twice."""
    stack = Stack(template, DispatcherShardRanges=ranges, ShardCount=shard_count, TargetQueueArns=QUEUE)
    names = [n for n in stack.of_type("AWS::Serverless::Function") if n != "DeadLetterFunction"]
    assert len(names) == len(ranges.split(","))
    for name in names:
        with pytest.raises(ConfigError) as info:
            Settings.from_env(stack.environment(name))
        assert str(info.value).startswith(f"DISPATCHER_SHARD_RANGES: {message}")


def test_all_stands_alone_as_the_range_of_a_single_dispatcher(template):
    rule = template["Rules"]["AllShardsStandsAlone"]
    assert "RuleCondition" not in rule and len(rule["Assertions"]) == 1
    assertion = rule["Assertions"][0]
    assert _refs(assertion["Assert"]) == {"DispatcherShardRanges"}
    message = assertion["AssertDescription"]
    assert "\n" not in message and len(message) <= 200 and "DispatcherShardRanges" in message

    def accepted(ranges: str) -> bool:
        return bool(evaluate_rule(assertion["Assert"], _parameter_values(template, DispatcherShardRanges=ranges)))

    assert accepted("all") and accepted("0-1,2-3") and accepted("0")
    assert not accepted("all,0-1") and not accepted("0-1,all")
    # A rule cannot count: all,all passes it, and both dispatchers refuse it at cold start.
    assert accepted("all,all")
    stack = Stack(template, DispatcherShardRanges="all,all", TargetQueueArns=QUEUE)
    with pytest.raises(ConfigError, match=r"^DISPATCHER_SHARD_RANGES: all is the range of a single dispatcher"):
        Settings.from_env(stack.environment("Dispatcher2Function"))


def test_the_first_slot_keeps_the_single_dispatchers_names(template):
    """An update from a one-dispatcher version keeps its function, schedule and log group."""
    resources = template["Resources"]
    for name in ("DispatcherFunction", "DispatcherLogGroup", "DispatcherErrorsAlarm", "DispatcherNotStartedAlarm"):
        assert "Condition" not in resources[name], name
    assert resources["DispatcherLogGroup"]["Properties"]["LogGroupName"] == {
        "Fn::Sub": "/hexeract/${AWS::StackName}/dispatcher"
    }
    for k in range(2, MAX_DISPATCHER_RANGES + 1):
        assert resources[f"Dispatcher{k}Function"]["Condition"] == f"HasDispatcher{k}"


# -- tracing and failed dispatcher invocations -------------------------------------------------


def test_both_functions_trace_with_xray_through_generated_roles(template):
    """With Tracing Active, SAM adds its X-Ray write policy to the role it generates for a function;
    a function with a Role of its own would not get it."""
    assert template["Globals"]["Function"]["Tracing"] == "Active"
    for name, fn in resources(template, "AWS::Serverless::Function").items():
        assert "Role" not in fn["Properties"], f"{name}: a role of its own gets no X-Ray permission from SAM"
        assert "Tracing" not in fn["Properties"], name


def test_a_failed_dispatcher_invocation_leaves_a_message_and_raises_an_alarm(template):
    queue_arn = {"Fn::GetAtt": ["DispatcherFailuresQueue", "Arn"]}
    queue = template["Resources"]["DispatcherFailuresQueue"]
    assert queue["Type"] == "AWS::SQS::Queue" and "Condition" not in queue
    assert queue["Properties"]["SqsManagedSseEnabled"] is True
    assert queue["Properties"]["MessageRetentionPeriod"] == 14 * 86400  # the longest SQS keeps a message

    for name in DISPATCHERS:
        props = template["Resources"][name]["Properties"]
        # Lambda's own retries spent (or the event too old): the record goes to the queue ...
        on_failure = props["EventInvokeConfig"]["DestinationConfig"]["OnFailure"]
        assert on_failure == {"Type": "SQS", "Destination": queue_arn}, name
        # ... and a start EventBridge Scheduler could not deliver at all too.
        schedule = props["Events"]["Every"]["Properties"]
        assert schedule["DeadLetterConfig"] == {"Arn": queue_arn}, name

    alarm = template["Resources"]["DispatcherFailuresAlarm"]["Properties"]
    assert (alarm["Namespace"], alarm["MetricName"]) == ("AWS/SQS", "ApproximateNumberOfMessagesVisible")
    assert alarm["Dimensions"] == [
        {"Name": "QueueName", "Value": {"Fn::GetAtt": ["DispatcherFailuresQueue", "QueueName"]}}
    ]
    assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (0, "GreaterThanThreshold")
    assert alarm["TreatMissingData"] == "notBreaching"  # SQS stops reporting an idle, empty queue
    others = template["Resources"]["DeadLetteredAlarm"]["Properties"]
    assert alarm["AlarmActions"] == others["AlarmActions"]
    outputs = template["Outputs"]
    assert outputs["DispatcherFailuresQueueUrl"]["Value"] == {"Ref": "DispatcherFailuresQueue"}


# -- operator policies -------------------------------------------------------------------------

READ_ACTIONS = {"dynamodb:DescribeTable", "dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query"}
# `hexeract --stack NAME` reads the table's name from the stack's outputs, on this stack only.
STACK_READ = {"cloudformation:DescribeStacks"}
STACK_ARN = {"Ref": "AWS::StackId"}
# What `hexeract scheduler add` (PutItem), pause, resume, cancel and dead-letter replay (UpdateItem) need.
CLI_WRITE_ACTIONS = {"dynamodb:PutItem", "dynamodb:UpdateItem"}
DYNAMODB_WRITE_ACTIONS = CLI_WRITE_ACTIONS | {
    "dynamodb:DeleteItem",
    "dynamodb:BatchWriteItem",
    "dynamodb:TransactWriteItems",
    "dynamodb:PartiQLInsert",
    "dynamodb:PartiQLUpdate",
    "dynamodb:PartiQLDelete",
    "dynamodb:CreateTable",
    "dynamodb:UpdateTable",
    "dynamodb:DeleteTable",
}
TABLE_ARN = {"Fn::GetAtt": ["SchedulesTable", "Arn"]}
INDEX_ARNS = {"Fn::Sub": "${SchedulesTable.Arn}/index/*"}


def policy_statements(template: dict[str, Any], policy: str) -> list[dict[str, Any]]:
    """The statements of one managed policy, !If branches unfolded."""
    assert template["Resources"][policy]["Type"] == "AWS::IAM::ManagedPolicy"
    return [s for name, s in _statements(template) if name == policy]


def granted(template: dict[str, Any], policy: str) -> set[str]:
    return {a for s in policy_statements(template, policy) for a in _as_list(s["Action"])}


def test_the_read_only_policy_grants_no_write(template):
    statements = policy_statements(template, "ReadOnlyPolicy")
    assert all(s["Effect"] == "Allow" and "Condition" not in s for s in statements)
    assert granted(template, "ReadOnlyPolicy") == READ_ACTIONS | STACK_READ
    assert not granted(template, "ReadOnlyPolicy") & DYNAMODB_WRITE_ACTIONS
    assert "lambda:InvokeFunction" not in granted(template, "ReadOnlyPolicy")  # replay is a write
    for stmt in statements:
        assert not any("*" in a for a in _as_list(stmt["Action"])), stmt
        if set(_as_list(stmt["Action"])) == STACK_READ:
            assert _as_list(stmt["Resource"]) == [STACK_ARN], "only this stack's outputs"
        else:
            assert all(r in (TABLE_ARN, INDEX_ARNS) for r in _as_list(stmt["Resource"])), stmt


def test_the_operator_policy_grants_reads_and_exactly_the_cli_writes(template):
    statements = policy_statements(template, "OperatorPolicy")
    assert granted(template, "OperatorPolicy") == READ_ACTIONS | STACK_READ | CLI_WRITE_ACTIONS | {
        "lambda:InvokeFunction"
    }
    assert granted(template, "OperatorPolicy") & DYNAMODB_WRITE_ACTIONS == CLI_WRITE_ACTIONS
    for stmt in statements:
        actions = set(_as_list(stmt["Action"]))
        if actions & CLI_WRITE_ACTIONS:
            assert _as_list(stmt["Resource"]) == [TABLE_ARN], "writes go to the table's items, nowhere else"
        if "lambda:InvokeFunction" in actions:
            assert actions == {"lambda:InvokeFunction"}
            assert _as_list(stmt["Resource"]) == [{"Fn::GetAtt": ["DeadLetterFunction", "Arn"]}]
    # read-only plus: every read grant of the read-only policy is in the operator one
    reads = [s for s in statements if set(_as_list(s["Action"])) <= READ_ACTIONS | STACK_READ]
    assert reads == policy_statements(template, "ReadOnlyPolicy")


def test_the_output_hexeract_stack_reads_is_the_table(template):
    output = template["Outputs"][TABLE_OUTPUT]
    assert output["Value"] == {"Ref": "SchedulesTable"} and "Condition" not in output


def test_the_operator_policies_are_outputs(template):
    outputs = template["Outputs"]
    for policy in ("ReadOnlyPolicy", "OperatorPolicy"):
        assert outputs[f"{policy}Arn"]["Value"] == {"Ref": policy}  # a managed policy's Ref is its ARN
        assert outputs[f"{policy}Arn"]["Description"]


# -- license and application metadata ----------------------------------------------------------


def pyproject() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_the_project_is_dual_licensed_mit_or_apache(template):
    project = pyproject()["project"]
    assert project["license"] == "MIT OR Apache-2.0"
    assert sorted(project["license-files"]) == ["LICENSE-APACHE", "LICENSE-MIT"]
    mit = (ROOT / "LICENSE-MIT").read_text()
    apache = (ROOT / "LICENSE-APACHE").read_text()
    assert mit.startswith("MIT License") and "Copyright (c) 2026 the hexeract-scheduler authors" in mit
    assert "Apache License" in apache and "Version 2.0, January 2004" in apache
    assert "Copyright (c) 2026 the hexeract-scheduler authors" in apache
    # PEP 639's license expression needs setuptools 77 to build
    assert any(re.fullmatch(r"setuptools>=(\d+)", r) and int(r.split(">=")[1]) >= 77 for r in _build_requires())


def _build_requires() -> list[str]:
    return pyproject()["build-system"]["requires"]  # type: ignore[no-any-return]


def test_the_application_metadata_is_what_the_serverless_application_repository_accepts(template):
    app = template["Metadata"]["AWS::ServerlessRepo::Application"]
    # no intrinsic function: SAR reads the values as written
    assert all(isinstance(v, str) or (isinstance(v, list) and all(isinstance(i, str) for i in v)) for v in app.values())
    assert re.fullmatch(r"[a-zA-Z0-9\-]+", app["Name"]) and len(app["Name"]) <= 140
    assert re.fullmatch(r"^[a-z0-9](([a-z0-9]|-(?!-))*[a-z0-9])?$", app["Author"]) and len(app["Author"]) <= 127
    assert 1 <= len(app["Description"]) <= 256
    assert app["SemanticVersion"] == pyproject()["project"]["version"]
    # one SPDX identifier (SAR takes no expression), one of the project's, with its own text
    assert app["SpdxLicenseId"] in pyproject()["project"]["license"].split(" OR ")
    assert app["LicenseUrl"] == {"Apache-2.0": "LICENSE-APACHE", "MIT": "LICENSE-MIT"}[app["SpdxLicenseId"]]
    for local in ("LicenseUrl", "ReadmeUrl"):  # local files `sam package` uploads
        assert (ROOT / app[local]).is_file(), local
    for url in ("SourceCodeUrl", "HomePageUrl"):
        assert app[url].startswith("https://"), url
    labels = app.get("Labels", [])
    assert len(labels) <= 10 and all(re.fullmatch(r"[a-zA-Z0-9+\-_:/@]{1,127}", label) for label in labels)


# The public repository's URL does not exist yet: until it does, the template holds this
# placeholder, the one value to set before `sam publish`.
PLACEHOLDER_SOURCE_URL = "https://github.com/nubster-opensources/hexeract-scheduler-aws"


def test_the_placeholder_source_code_url_is_flagged_as_the_value_to_set_before_publishing(template):
    app = template["Metadata"]["AWS::ServerlessRepo::Application"]
    if app["SourceCodeUrl"] != PLACEHOLDER_SOURCE_URL:
        return  # set: nothing left to flag
    assert app["HomePageUrl"] == PLACEHOLDER_SOURCE_URL  # set both together
    lines = (ROOT / "template.yaml").read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("SourceCodeUrl:"))
    comment = " ".join(line.strip() for line in lines[max(at - 5, 0) : at] if line.strip().startswith("#"))
    assert "SET BEFORE PUBLISHING" in comment and "SourceCodeUrl" in comment, comment
    deploy = " ".join((ROOT / "docs" / "deploy.md").read_text().split())
    assert "is the one value to set before `sam publish`" in deploy
