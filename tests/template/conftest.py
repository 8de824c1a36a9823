"""What the template tests share: template.yaml read once per module, the environment a deployed
dispatcher gets, and the helpers several subjects use (the functions' names, policy statements, rules)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from hexeract_scheduler.domain.shards import MAX_DISPATCHER_RANGES

from ..cli.conftest import hexeract, reuse_clients  # noqa: F401  (fixtures of test_operator_policies.py)
from ..support.cfn_eval import Stack, load_template


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return load_template()


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


@pytest.fixture
def template_env(template: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """The process environment the deployed dispatcher gets with the default parameters."""
    env = Stack(template).environment("DispatcherFunction")
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    yield env


QUEUE = "arn:aws:sqs:eu-west-1:123456789012:orders"


def all_statements(template: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
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


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


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


def policy_statements(template: dict[str, Any], policy: str) -> list[dict[str, Any]]:
    """The statements of one managed policy, !If branches unfolded."""
    assert template["Resources"][policy]["Type"] == "AWS::IAM::ManagedPolicy"
    return [s for name, s in all_statements(template) if name == policy]


def evaluate_rule(expr: Any, values: dict[str, Any]) -> Any:
    """A rule condition or assertion evaluated as CloudFormation does, with the parameter values given
    (a CommaDelimitedList's value is the list CloudFormation splits it into: "" is [""])."""
    if isinstance(expr, dict) and len(expr) == 1:
        ((fn, args),) = expr.items()
        if fn == "Ref":
            return values[args]
        ev = [evaluate_rule(a, values) for a in as_list(args)]
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


def refs(node: Any) -> set[str]:
    if isinstance(node, dict):
        found = {node["Ref"]} if set(node) == {"Ref"} else set()
        return found.union(*(refs(v) for v in node.values()))
    if isinstance(node, list):
        return set().union(*(refs(v) for v in node))
    return set()


def parameter_values(template: dict[str, Any], **overrides: str) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name, param in template["Parameters"].items():
        raw = overrides.get(name, str(param["Default"]))
        values[name] = raw.split(",") if param["Type"] == "CommaDelimitedList" else raw
    return values
