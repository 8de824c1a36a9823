"""The functions of template.yaml: handlers that import, the runtime and layer, tracing, and the
events they are sent (the schedule's input, the sample events)."""

from __future__ import annotations

import importlib
import json
import logging
import sys
from collections.abc import Iterator

import pytest

from hexeract_scheduler.service.dead_letter import parse_dead_letter_request

from ..support.cfn_eval import ROOT
from .conftest import DISPATCHERS, resources


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
    assert runtime in layer["Properties"]["CompatibleRuntimes"]
    assert (ROOT / "layers/core/requirements.txt").is_file()
    assert (ROOT / "layers/core/hexeract_scheduler/__init__.py").is_file()
    # Built by layers/core/Makefile, for the runtime's Python and the functions' architecture.
    assert layer["Metadata"] == {"BuildMethod": "makefile", "BuildArchitecture": "arm64"}
    recipe = (ROOT / "layers/core/Makefile").read_text()
    assert "build-CoreLayer:" in recipe
    assert f"--python-version {runtime.removeprefix('python')}" in recipe
    assert "--platform manylinux2014_aarch64" in recipe


def test_the_layer_ships_neither_the_command_line_nor_the_local_endpoint():
    """They need click and moto, which the layer does not install; make build-check imports every
    module the layer does ship (tools/check_layer.py)."""
    recipe = (ROOT / "layers/core/Makefile").read_text()
    assert "NOT_IN_LAYER := cli local.py" in recipe
    requirements = (ROOT / "layers/core/requirements.txt").read_text()
    assert "click" not in requirements and "moto" not in requirements


def test_both_functions_trace_with_xray_through_generated_roles(template):
    """With Tracing Active, SAM adds its X-Ray write policy to the role it generates for a function;
    a function with a Role of its own would not get it."""
    assert template["Globals"]["Function"]["Tracing"] == "Active"
    for name, fn in resources(template, "AWS::Serverless::Function").items():
        assert "Role" not in fn["Properties"], f"{name}: a role of its own gets no X-Ray permission from SAM"
        assert "Tracing" not in fn["Properties"], name


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
