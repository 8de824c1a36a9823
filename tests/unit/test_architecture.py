"""The layers the package's folders show: a module imports only from its own layer and the layers
its layer may use; only the compositions build the DynamoDB store; the package docstring maps
every module; the old flat paths still import, with a warning."""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import hexeract_scheduler
from hexeract_scheduler import _moved

PACKAGE = Path(__file__).resolve().parents[2] / "layers" / "core" / "hexeract_scheduler"
NAME = "hexeract_scheduler"
# Where a module may import from, by the first part of its path in the package. The foundation
# (errors, concurrency) is open to every layer.
FOUNDATION = {"errors", "concurrency"}
MAY_IMPORT: dict[str, set[str]] = {
    "errors": set(),
    "concurrency": {"errors"},
    "domain": {"errors", "domain"},
    "aws": {"errors", "aws"},
    "store": FOUNDATION | {"domain", "aws", "store"},
    "sinks": FOUNDATION | {"domain", "aws", "sinks"},
    "engine": FOUNDATION | {"domain", "store.contract", "sinks", "engine"},
    "service": FOUNDATION | {"domain", "aws", "store", "sinks", "engine", "service"},
    "cli": FOUNDATION | {"domain", "aws", "store", "sinks", "engine", "service", "cli"},
    "local": {"aws"},
    "_moved": set(),
    "__init__": FOUNDATION | {"domain", "store", "sinks", "engine", "_moved"},
}
# The compositions: the only modules that build (so import) the DynamoDB store.
DYNAMO_IMPORTERS = {"service/compose.py", "cli/commands.py"}
SOFT_MAX_LINES = 500


def modules() -> dict[str, Path]:
    """Dotted name within the package (``engine.worker``, ``store.dynamo``) -> file."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts) or "__init__"] = path
    return out


KNOWN = set(modules())


def package_imports(path: Path) -> set[str]:
    """The package's modules ``path`` imports, dotted within the package (``domain.model``)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path.name}: relative import; the package imports by absolute path"
            mod = node.module or ""
            if mod == NAME or mod.startswith(NAME + "."):
                inner = mod.removeprefix(NAME).removeprefix(".")
                # a name imported from a package may be one of its modules
                found |= {
                    f"{inner}.{a.name}".lstrip(".") for a in node.names if f"{inner}.{a.name}".lstrip(".") in KNOWN
                }
                found |= {inner} if inner else set()
        elif isinstance(node, ast.Import):
            found |= {a.name.removeprefix(NAME + ".") for a in node.names if a.name.startswith(NAME + ".")}
    return found


def allowed(importer: str, imported: str) -> bool:
    layer = importer.split(".")[0]
    return any(imported == ok or imported.startswith(ok + ".") for ok in MAY_IMPORT[layer])


def test_every_module_imports_only_from_the_layers_its_folder_may_use():
    mods = modules()
    assert set(MAY_IMPORT) == {name.split(".")[0] for name in mods}, "a new top-level module needs its layer here"
    offenders = {name: sorted(i for i in package_imports(path) if not allowed(name, i)) for name, path in mods.items()}
    assert {name: bad for name, bad in offenders.items() if bad} == {}


def test_the_check_sees_an_import_across_layers():
    assert allowed("engine.worker", "store.contract")
    assert not allowed("engine.worker", "store.dynamo")
    assert not allowed("domain.model", "aws.clients")
    assert not allowed("service.settings", "cli.commands")


def test_only_the_compositions_import_the_dynamo_store():
    importers = {
        path.relative_to(PACKAGE).as_posix()
        for name, path in modules().items()
        if not name.startswith("store.dynamo") and any(i.startswith("store.dynamo") for i in package_imports(path))
    }
    # (the package's __init__ exposes DynamoScheduleStore lazily, on first use)
    assert importers == DYNAMO_IMPORTERS | {"__init__.py"}


@pytest.mark.parametrize(
    "module",
    [
        "hexeract_scheduler",
        "hexeract_scheduler.engine.worker",
        "hexeract_scheduler.service.dispatcher",
        "hexeract_scheduler.service.dead_letter",
        "hexeract_scheduler.service.settings",
        "hexeract_scheduler.store.memory",
        "hexeract_scheduler.service.observability",
    ],
)
def test_importing_the_core_never_loads_the_dynamo_store(module):
    code = f"import sys, {module}; assert not [m for m in sys.modules if 'dynamo' in m and 'hexeract' in m], module"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_package_docstring_maps_every_module_once():
    doc = hexeract_scheduler.__doc__ or ""
    listed = re.findall(r"^    ([a-z_][a-z_.]*) {2,}\S", doc, re.M)
    headings = {"domain", "aws", "store", "sinks", "engine", "service"}  # folders: the map's headings
    expected = {n for n in modules() if n != "__init__" and n not in headings and not n.startswith("cli.")}
    assert sorted(listed) == sorted(expected)
    cli_line = next(line for line in doc.splitlines() if line.startswith("    cli "))
    assert all(n.removeprefix("cli.") in cli_line for n in modules() if n.startswith("cli.") and n != "cli.__main__")


def test_files_are_split_by_concept_and_a_long_one_is_flagged():
    """No hard cap (a file holds one concept, however long); past ~500 lines, a warning asks whether
    it still does."""
    sizes = {p.relative_to(PACKAGE).as_posix(): len(p.read_text().splitlines()) for p in PACKAGE.rglob("*.py")}
    for name, n in sizes.items():
        if n > SOFT_MAX_LINES:
            warnings.warn(f"{name} has {n} lines: does it still hold one concept?", stacklevel=1)


@pytest.mark.parametrize("old", sorted(_moved.MOVED))
def test_an_old_module_path_still_imports_with_a_deprecation_warning(old):
    for name in [n for n in sys.modules if n == f"{NAME}.{old}" or n.startswith(f"{NAME}.{old}.")]:
        if name.removeprefix(NAME + ".") in _moved.MOVED:
            del sys.modules[name]
    with pytest.warns(DeprecationWarning, match="moved to"):
        module = importlib.import_module(f"{NAME}.{old}")
    first = importlib.import_module(f"{NAME}.{_moved.MOVED[old][0]}")
    public = [n for n in vars(first) if not n.startswith("_")]
    assert all(getattr(module, n) is getattr(first, n) for n in public)


def test_the_repository_names_no_folder_beside_it():
    """Tests once read a `shared` folder laid beside the checkout (and skipped without it): a clone
    must be complete. The vectors are vendored in tests/data; nothing may point outside the clone."""
    root = PACKAGE.parents[2]
    listed = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True)
    if listed.returncode != 0:
        pytest.skip("not a git checkout")
    outside = re.compile(r"\.\./shared\b|parents?\s*/\s*[\"']shared[\"']|(ROOT|REPO)\.parent\b")
    text_files = {".py", ".md", ".toml", ".yaml", ".json", ".txt"}
    offenders = []
    for name in listed.stdout.splitlines():
        path = root / name
        if path.is_file() and (path.suffix in text_files or path.name == "Makefile"):
            text = path.read_text(errors="replace")
            offenders += [f"{name}: {m.group(0)}" for m in outside.finditer(text)]
    assert offenders == []


def test_nothing_in_the_repository_imports_an_old_module_path():
    root = PACKAGE.parents[2]
    old = {f"{NAME}.{name}" for name in _moved.MOVED}
    offenders = []
    for path in root.glob("*/**/*.py"):
        if ".venv" in path.parts or "node_modules" in path.parts or path.name == "_moved.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            offenders += [f"{path.relative_to(root)}: {n}" for n in names if n in old]
    assert offenders == []
