"""Writes the dispatcher slots of template.yaml: one dispatcher per ``DispatcherShardRanges`` entry.

    python tools/dispatcher_slots.py          # rewrite the generated parts of template.yaml
    python tools/dispatcher_slots.py --check  # exit 1 if they are out of date (tests/test_template.py)

The template deploys up to ``MAX_DISPATCHER_RANGES`` dispatchers, each with its own function,
log group, EventBridge schedule, reserved concurrency and alarms. Slot ``k`` exists when the
parameter has a ``k``-th entry (condition ``HasDispatcher<k>``; slot 1 always exists) and reads the
shards of that entry. Plain CloudFormation conditions, no ``Fn::ForEach``: docs/deploy.md
("Several dispatchers") says why the ``AWS::LanguageExtensions`` transform was not used.

The slots are written here, once, rather than by hand eight times; only the text between the
``BEGIN GENERATED`` and ``END GENERATED`` markers of template.yaml is replaced.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from hexeract_scheduler.shards import MAX_DISPATCHER_RANGES

TEMPLATE = Path(__file__).resolve().parents[1] / "template.yaml"

# The k-th entry of DispatcherShardRanges, or "" if there is none: the list joined behind an empty
# entry (so that index k is entry k) and padded with empty entries (Fn::Select never runs past it).
_PADDING = "," * MAX_DISPATCHER_RANGES
RANGE = (
    '!Select [{k}, !Split [",", !Sub [",${{Ranges}}'
    + _PADDING
    + '", {{Ranges: !Join [",", !Ref DispatcherShardRanges]}}]]]'
)


def names(k: int) -> dict[str, str]:
    """Slot 1 keeps the names of the single dispatcher of earlier versions."""
    prefix = "Dispatcher" if k == 1 else f"Dispatcher{k}"
    return {
        "k": str(k),
        "p": prefix,
        "log": "dispatcher" if k == 1 else f"dispatcher-{k}",
        "range": RANGE.format(k=k),
        "cond": "" if k == 1 else f"    Condition: HasDispatcher{k}\n",
    }


CONDITION = '  HasDispatcher{k}: !Not [!Equals [{range}, ""]]\n'

RESOURCES = """\
  {p}LogGroup:
    Type: AWS::Logs::LogGroup
{cond}    Properties:
      LogGroupName: !Sub "/hexeract/${{AWS::StackName}}/{log}"
      RetentionInDays: !Ref LogRetentionDays

  {p}Function:
    Type: AWS::Serverless::Function
{cond}    Properties:
      Description: Dispatcher {k} (entry {k} of DispatcherShardRanges) - claims and delivers its shards' occurrences.
      CodeUri: functions/dispatcher/
      Handler: app.lambda_handler
      Timeout: !If [OnDemand, 270, !Ref DispatcherTimeout]
      MemorySize: !Ref DispatcherMemorySize
      ReservedConcurrentExecutions: !Ref DispatcherReservedConcurrency
      LoggingConfig:
        LogGroup: !Ref {p}LogGroup
      Environment:
        Variables:
          DISPATCHER_SHARDS: {range}
      Policies:
        - !Ref DispatcherPolicy
      EventInvokeConfig:
        MaximumEventAgeInSeconds: !If [OnDemand, 60, 300]
        MaximumRetryAttempts: 2
        DestinationConfig:
          OnFailure:
            Type: SQS
            Destination: !GetAtt DispatcherFailuresQueue.Arn
      Events:
        Every:
          Type: ScheduleV2
          Properties:
            Description: Starts a run of hexeract dispatcher {k}.
            ScheduleExpression: !If [OnDemand, "rate(1 minute)", !Sub "rate(${{DispatchPeriodMinutes}} minutes)"]
            OmitName: true
            FlexibleTimeWindow:
              Mode: "OFF"
            RetryPolicy:
              MaximumRetryAttempts: 2
              MaximumEventAgeInSeconds: 60
            DeadLetterConfig:
              Arn: !GetAtt DispatcherFailuresQueue.Arn
            Input: >-
              {{"source": "hexeract.dispatcher", "dispatcher": "{k}",
              "schedule_arn": "<aws.scheduler.schedule-arn>", "scheduled_time": "<aws.scheduler.scheduled-time>",
              "execution_id": "<aws.scheduler.execution-id>", "attempt_number": "<aws.scheduler.attempt-number>"}}

  {p}ErrorsAlarm:
    Type: AWS::CloudWatch::Alarm
{cond}    Properties:
      AlarmDescription: Dispatcher {k} failed (see its log group).
      Namespace: AWS/Lambda
      MetricName: Errors
      Dimensions:
        - {{Name: FunctionName, Value: !Ref {p}Function}}
      Statistic: Sum
      Period: 300
      EvaluationPeriods: 1
      Threshold: 0
      ComparisonOperator: GreaterThanThreshold
      TreatMissingData: notBreaching
      AlarmActions: !If [HasAlarmTopic, [!Ref AlarmTopicArn], !Ref AWS::NoValue]

  {p}NotStartedAlarm:
    Type: AWS::CloudWatch::Alarm
{cond}    Properties:
      AlarmDescription: Dispatcher {k} was not started for 15 minutes (5 in on-demand mode) - its shards are not read.
      Namespace: AWS/Lambda
      MetricName: Invocations
      Dimensions:
        - {{Name: FunctionName, Value: !Ref {p}Function}}
      Statistic: Sum
      Period: !If [OnDemand, 300, 900]
      EvaluationPeriods: 1
      Threshold: 1
      ComparisonOperator: LessThanThreshold
      TreatMissingData: breaching
      AlarmActions: !If [HasAlarmTopic, [!Ref AlarmTopicArn], !Ref AWS::NoValue]

"""

OUTPUTS = """\
  {p}FunctionName:
{cond}    Description: Dispatcher {k}, over entry {k} of DispatcherShardRanges.
    Value: !Ref {p}Function
  {p}FunctionArn:
{cond}    Value: !GetAtt {p}Function.Arn
"""


def sections() -> dict[str, str]:
    """The generated text of each marked section, by section name."""
    slots = [names(k) for k in range(1, MAX_DISPATCHER_RANGES + 1)]
    return {
        "CONDITIONS": "".join(CONDITION.format(**s) for s in slots[1:]),
        "DISPATCHERS": "".join(RESOURCES.format(**s) for s in slots),
        "OUTPUTS": "".join(OUTPUTS.format(**s) for s in slots),
    }


def render(text: str) -> str:
    """``text`` (template.yaml) with every marked section regenerated."""
    for name, body in sections().items():
        pattern = re.compile(
            rf"(^  # BEGIN GENERATED {name}[^\n]*\n)(.*?)(^  # END GENERATED {name}\n)", re.DOTALL | re.MULTILINE
        )
        text, count = pattern.subn(lambda m, body=body: m.group(1) + body + m.group(3), text)
        if count != 1:
            raise SystemExit(f"template.yaml: expected one BEGIN/END GENERATED {name} pair, found {count}")
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if template.yaml is out of date")
    args = parser.parse_args(argv)
    text = TEMPLATE.read_text()
    new = render(text)
    if args.check:
        if new != text:
            print("template.yaml: dispatcher slots out of date; run python tools/dispatcher_slots.py", file=sys.stderr)
            return 1
        return 0
    if new != text:
        TEMPLATE.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
