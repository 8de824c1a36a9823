"""The configuration template.yaml gives the functions: the variables Settings reads, within the
bounds it accepts, and the coverage arithmetic of both dispatch modes on the default parameters."""

from __future__ import annotations

import math
import re

from hexeract_scheduler.domain.shards import MAX_SHARDS, parse_shard_ranges
from hexeract_scheduler.service.bounds import BOUNDS, SCHEDULER_DELIVERY_WINDOW_SECONDS
from hexeract_scheduler.service.dispatcher import ON_DEMAND_OVERLAP_SECONDS
from hexeract_scheduler.service.settings import ENV_VARS, ON_DEMAND, Settings

from ..support.cfn_eval import Stack
from .conftest import DISPATCHERS, default, global_env, resources


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
    """The coverage arithmetic written in template.yaml and docs/dispatchers.md, on the defaults
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
    # The largest DispatchTimeoutSeconds on-demand mode accepts, as docs/dispatchers.md says.
    assert run - period - SCHEDULER_DELIVERY_WINDOW_SECONDS == 120
