"""template.yaml read and evaluated as CloudFormation would, for the tests.

:func:`load_template` reads it with :class:`CfnLoader` (the short-form tags in their long form:
``!Ref X`` is ``{"Ref": "X"}``). :class:`Stack` evaluates it for given parameter values: which
resources and outputs a stack would have (their ``Condition``), and the values CloudFormation would
compute from the parameters (``Ref``, ``Fn::If``, ``Fn::Select``, ``Fn::Split``, ``Fn::Join``,
``Fn::Sub``, the condition functions). References to resources and ``Fn::GetAtt`` are left as
they are.

It covers the intrinsic functions template.yaml uses with parameters, nothing more: an unknown
function fails the test instead of being skipped.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "template.yaml"

_SUB_VAR = re.compile(r"\$\{([A-Za-z0-9_:.]+)\}")
PSEUDO = {"AWS::StackName": "hexeract", "AWS::Region": "eu-west-1", "AWS::AccountId": "123456789012"}


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


def load_template(path: Path = TEMPLATE) -> dict[str, Any]:
    """template.yaml (or another template), its short-form tags in their long form."""
    return yaml.load(path.read_text(), Loader=CfnLoader)  # type: ignore[no-any-return]  # a SafeLoader


class Stack:
    """template.yaml as deployed with ``overrides`` (parameter name -> the text given to CloudFormation)."""

    def __init__(self, template: dict[str, Any], **overrides: str) -> None:
        self.template = template
        params = template["Parameters"]
        unknown = set(overrides) - set(params)
        assert not unknown, f"no such parameter: {unknown}"
        self.params: dict[str, Any] = {}
        for name, param in params.items():
            raw = overrides.get(name, str(param.get("Default", "")))
            self.params[name] = raw.split(",") if param["Type"] == "CommaDelimitedList" else raw
        self.conditions: dict[str, bool] = {}
        for name, expr in template.get("Conditions", {}).items():
            self.conditions[name] = bool(self.value(expr))

    def exists(self, node: dict[str, Any]) -> bool:
        return "Condition" not in node or self.conditions[node["Condition"]]

    @property
    def resources(self) -> dict[str, dict[str, Any]]:
        """The resources the stack creates, their properties evaluated."""
        return {k: self.value(copy.deepcopy(r)) for k, r in self.template["Resources"].items() if self.exists(r)}

    @property
    def outputs(self) -> dict[str, dict[str, Any]]:
        return {k: self.value(copy.deepcopy(o)) for k, o in self.template["Outputs"].items() if self.exists(o)}

    def of_type(self, kind: str) -> dict[str, dict[str, Any]]:
        return {k: r for k, r in self.resources.items() if r["Type"] == kind}

    def environment(self, function: str) -> dict[str, str]:
        """A function's environment: Globals, then its own variables; resources become placeholders."""
        variables = dict(self.template["Globals"]["Function"]["Environment"]["Variables"])
        own = self.template["Resources"][function]["Properties"].get("Environment", {}).get("Variables", {})
        variables.update(own)
        env = {}
        for var, expr in variables.items():
            value = self.value(copy.deepcopy(expr))
            if isinstance(value, dict) and set(value) == {"Ref"}:
                value = f"{value['Ref'].lower()}-from-template"
            assert isinstance(value, (str, int)), (var, value)
            env[var] = str(value)
        return env

    # -- intrinsic functions --------------------------------------------------------------------

    def value(self, node: Any) -> Any:
        if isinstance(node, list):
            return [self.value(n) for n in node]
        if not isinstance(node, dict):
            return node
        if len(node) == 1:
            ((fn, args),) = node.items()
            if fn == "Ref":
                if args in self.params:
                    return self.params[args]
                if args in PSEUDO:
                    return PSEUDO[args]
                return node  # a resource
            if fn == "Condition":
                return self.conditions[args]
            if fn.startswith("Fn::") and fn != "Fn::GetAtt":
                return self._call(fn, args)
        return {k: self.value(v) for k, v in node.items()}

    def _call(self, fn: str, args: Any) -> Any:
        if fn == "Fn::If":
            name, yes, no = args
            chosen = self.value(yes if self.conditions[name] else no)
            return chosen
        ev = [self.value(a) for a in args] if isinstance(args, list) else self.value(args)
        if fn == "Fn::Not":
            return not ev[0]
        if fn == "Fn::Equals":
            return ev[0] == ev[1]
        if fn == "Fn::And":
            return all(ev)
        if fn == "Fn::Or":
            return any(ev)
        if fn == "Fn::Select":
            index, items = ev
            assert isinstance(items, list), items
            return items[int(index)]  # an IndexError is CloudFormation's deploy failure
        if fn == "Fn::Split":
            sep, text = ev
            assert isinstance(text, str), text
            return text.split(sep)
        if fn == "Fn::Join":
            sep, items = ev
            assert isinstance(items, list) and all(isinstance(i, str) for i in items), items
            return sep.join(items)
        if fn == "Fn::Sub":
            text, variables = (ev, {}) if isinstance(ev, str) else (ev[0], ev[1])
            return self._sub(text, variables)
        raise AssertionError(f"{fn} is not a function this evaluator knows")

    def _sub(self, text: str, variables: dict[str, Any]) -> Any:
        unresolved = False

        def replace(m: re.Match[str]) -> str:
            nonlocal unresolved
            name = m.group(1)
            for source in (variables, self.params, PSEUDO):
                if name in source:
                    value = source[name]
                    assert isinstance(value, (str, int)), (name, value)
                    return str(value)
            unresolved = True  # a resource attribute: left for CloudFormation
            return m.group(0)

        result = _SUB_VAR.sub(replace, text)
        return {"Fn::Sub": result} if unresolved else result
