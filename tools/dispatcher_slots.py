"""Writes the dispatcher slots of template.yaml from tools/dispatcher_slot.yaml.

    python tools/dispatcher_slots.py          # rewrite the generated parts of template.yaml
    python tools/dispatcher_slots.py --check  # exit 1 if they are out of date (make lint, tests/template)

The template deploys up to ``MAX_DISPATCHER_RANGES`` dispatchers, each with its own function,
log group, EventBridge schedule, reserved concurrency and alarms. Slot ``k`` exists when the
parameter has a ``k``-th entry (condition ``HasDispatcher<k>``; slot 1 always exists) and reads the
shards of that entry. Plain CloudFormation conditions, no ``Fn::ForEach``: docs/dispatchers.md
("Why generated slots, not Fn::ForEach") says why.

The slot is written once, as slot 2, in tools/dispatcher_slot.yaml: a template of its own that
cfn-lint checks alone. Its ``BEGIN SLOT``/``END SLOT`` parts are copied once per slot into the
``BEGIN GENERATED``/``END GENERATED`` sections of template.yaml (nothing else there is touched),
with the slot number made ``k`` where the file's header says it is written.
"""

from __future__ import annotations

import argparse
import re
import sys
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from hexeract_scheduler.domain.shards import MAX_DISPATCHER_RANGES

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "template.yaml"
SLOT_FILE = ROOT / "tools" / "dispatcher_slot.yaml"

# The slot number of tools/dispatcher_slot.yaml is 2 where it follows one of these. In a name (no
# space: Dispatcher2Function, HasDispatcher2, dispatcher-2) slot 1 has no number; in a text or an
# index it is 1. The condition's lines are left out of slot 1, which always exists.
NAMED = re.compile(r"(Dispatcher|dispatcher-)2(?!\d)")
NUMBERED = re.compile(r'(Dispatcher |dispatcher |entry |"dispatcher": "|!Select \[)2(?!\d)')
CONDITION = "HasDispatcher2"
# Entry k of DispatcherShardRanges, or "" if there is none: the list joined behind an empty entry
# (so that index k is entry k) and padded with one empty entry per slot (Fn::Select never runs past).
PADDING = re.compile(r'(",\$\{Ranges\}),*(")')

# template.yaml section -> the part of tools/dispatcher_slot.yaml it repeats
SECTIONS = {"CONDITIONS": "Conditions", "DISPATCHERS": "Resources", "OUTPUTS": "Outputs"}
# A top-level key of tools/dispatcher_slot.yaml, and the slot's text in it.
SLOT_PART = re.compile(r"^(\w+):\n(?:[ #][^\n]*\n|\n)*?  # BEGIN SLOT\n(.*?)^  # END SLOT\n", re.MULTILINE | re.DOTALL)


def slot_parts(text: str) -> dict[str, str]:
    """The BEGIN SLOT/END SLOT text of each top-level part of tools/dispatcher_slot.yaml."""
    parts: dict[str, str] = {}
    for part, body in SLOT_PART.findall(text):
        if part in parts:
            raise SystemExit(f"{SLOT_FILE.name}: two BEGIN/END SLOT pairs in {part}")
        parts[part] = body
    if set(parts) != set(SECTIONS.values()):
        raise SystemExit(f"{SLOT_FILE.name}: expected a BEGIN/END SLOT pair in each of {', '.join(SECTIONS.values())}")
    return parts


def slot(text: str, k: int) -> str:
    """Slot ``k`` of a part of tools/dispatcher_slot.yaml (written as slot 2)."""
    if k == 1:
        text = "".join(line for line in text.splitlines(keepends=True) if CONDITION not in line)
    text = NAMED.sub(lambda m: m[1].rstrip("-") if k == 1 else f"{m[1]}{k}", text)
    text = NUMBERED.sub(lambda m: f"{m[1]}{k}", text)
    return PADDING.sub(lambda m: m[1] + "," * MAX_DISPATCHER_RANGES + m[2], text)


def sections(slot_text: str | None = None) -> dict[str, str]:
    """The generated text of each marked section of template.yaml, by section name."""
    parts = slot_parts(SLOT_FILE.read_text() if slot_text is None else slot_text)
    return {
        name: "".join(slot(parts[part], k) for k in range(1, MAX_DISPATCHER_RANGES + 1))
        for name, part in SECTIONS.items()
    }


def _between_markers(body: str, m: re.Match[str]) -> str:
    return m.group(1) + body + m.group(3)


def render(text: str, slot_text: str | None = None) -> str:
    """``text`` (template.yaml) with every marked section regenerated."""
    for name, body in sections(slot_text).items():
        pattern = re.compile(
            rf"(^  # BEGIN GENERATED {name}[^\n]*\n)(.*?)(^  # END GENERATED {name}\n)", re.DOTALL | re.MULTILINE
        )
        text, count = pattern.subn(partial(_between_markers, body), text)
        if count != 1:
            raise SystemExit(f"template.yaml: expected one BEGIN/END GENERATED {name} pair, found {count}")
    return text


class _Loader(yaml.SafeLoader):
    """Reads CloudFormation's short-form tags as ``{tag: value}``: enough to compare declarations."""


def _tag(loader: _Loader, suffix: str, node: yaml.Node) -> dict[str, Any]:
    if isinstance(node, yaml.ScalarNode):
        return {suffix: loader.construct_scalar(node)}
    if isinstance(node, yaml.SequenceNode):
        return {suffix: loader.construct_sequence(node, deep=True)}
    return {suffix: loader.construct_mapping(node, deep=True)}  # type: ignore[arg-type]


_Loader.add_multi_constructor("!", _tag)


def context_differences(template_text: str, slot_text: str) -> list[str]:
    """Where the stand-ins of tools/dispatcher_slot.yaml differ from what template.yaml declares:
    parameters and resources by their Type, conditions and Globals by their value."""
    template: dict[str, Any] = yaml.load(template_text, Loader=_Loader)
    own: dict[str, Any] = yaml.load(slot_text, Loader=_Loader)
    in_slot = {name for part in slot_parts(slot_text).values() for name in yaml.load(part, Loader=_Loader) or {}}
    found = []
    for section in ("Parameters", "Resources", "Conditions"):
        for name, mine in own.get(section, {}).items():
            if name in in_slot:
                continue
            theirs = template.get(section, {}).get(name)
            if theirs is None:
                found.append(f"{section}.{name} is not declared in template.yaml")
            elif section != "Conditions" and mine["Type"] != theirs["Type"]:
                found.append(f"{section}.{name}: Type {mine['Type']} here, {theirs['Type']} in template.yaml")
            elif section == "Conditions" and mine != theirs:
                found.append(f"Conditions.{name}: {mine} here, {theirs} in template.yaml")
    for name, mine in own.get("Globals", {}).get("Function", {}).items():
        theirs = template["Globals"]["Function"].get(name)
        if mine != theirs:
            found.append(f"Globals.Function.{name}: {mine} here, {theirs} in template.yaml")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if template.yaml is out of date")
    args = parser.parse_args(argv)
    text, slot_text = TEMPLATE.read_text(), SLOT_FILE.read_text()
    differences = context_differences(text, slot_text)
    if differences:
        print(f"{SLOT_FILE.name} stands in for template.yaml, but:\n  " + "\n  ".join(differences), file=sys.stderr)
        return 1
    new = render(text, slot_text)
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
