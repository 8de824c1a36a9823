"""One dispatcher per DispatcherShardRanges entry: the slots tools/dispatcher_slots.py writes from
tools/dispatcher_slot.yaml, and the stacks CloudFormation would create from given ranges."""

from __future__ import annotations

import json

import pytest

from hexeract_scheduler.domain.shards import MAX_DISPATCHER_RANGES
from hexeract_scheduler.errors import ConfigError
from hexeract_scheduler.service.settings import ON_DEMAND, Settings
from tools import dispatcher_slots

from ..support.cfn_eval import ROOT, Stack
from .conftest import DISPATCHERS, QUEUE, default, evaluate_rule, parameter_values, refs


def test_the_dispatcher_slots_are_the_generated_ones():
    """tools/dispatcher_slots.py writes the slots from tools/dispatcher_slot.yaml; the template holds
    exactly what it writes (and the slot file's stand-ins are what the template declares)."""
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
    assert refs(assertion["Assert"]) == {"DispatcherShardRanges"}
    message = assertion["AssertDescription"]
    assert "\n" not in message and len(message) <= 200 and "DispatcherShardRanges" in message

    def accepted(ranges: str) -> bool:
        return bool(evaluate_rule(assertion["Assert"], parameter_values(template, DispatcherShardRanges=ranges)))

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
