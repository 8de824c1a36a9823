"""The outputs of template.yaml: the table (which hexeract --stack reads), the functions, the policies."""

from __future__ import annotations

from hexeract_scheduler.aws.stack import TABLE_OUTPUT

from .conftest import DISPATCHERS


def test_outputs_name_the_table_and_the_functions(template):
    outputs = template["Outputs"]
    assert outputs["SchedulesTableName"]["Value"] == {"Ref": "SchedulesTable"}
    for fn in (*DISPATCHERS, "DeadLetterFunction"):
        assert outputs[f"{fn}Name"]["Value"] == {"Ref": fn}
        assert outputs[f"{fn}Arn"]["Value"] == {"Fn::GetAtt": [fn, "Arn"]}
        assert outputs[f"{fn}Name"].get("Condition") == template["Resources"][fn].get("Condition")
        assert outputs[f"{fn}Arn"].get("Condition") == template["Resources"][fn].get("Condition")
    assert outputs["DispatcherRanges"]["Value"] == {"Fn::Join": [",", {"Ref": "DispatcherShardRanges"}]}


def test_the_output_hexeract_stack_reads_is_the_table(template):
    output = template["Outputs"][TABLE_OUTPUT]
    assert output["Value"] == {"Ref": "SchedulesTable"} and "Condition" not in output


def test_the_operator_policies_are_outputs(template):
    outputs = template["Outputs"]
    for policy in ("ReadOnlyPolicy", "OperatorPolicy"):
        assert outputs[f"{policy}Arn"]["Value"] == {"Ref": policy}  # a managed policy's Ref is its ARN
        assert outputs[f"{policy}Arn"]["Description"]
