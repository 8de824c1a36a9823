"""The alarms of template.yaml: on the metrics the dispatcher emits, on each dispatcher's invocations,
and on the queue of failed dispatcher invocations."""

from __future__ import annotations

from hexeract_scheduler.service import observability
from hexeract_scheduler.service.bounds import SCHEDULER_DELIVERY_WINDOW_SECONDS

from .conftest import DISPATCHERS, resources


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
