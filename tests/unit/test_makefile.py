"""The Makefile's interpreter check and venv handling, on a copy of it with fake interpreters.

A fake ``python`` is a shell script that prints a version (what the Makefile's probe prints) and,
as ``python -m venv DIR``, writes ``DIR/pyvenv.cfg`` with that version: enough for make's logic,
and fast (nothing is installed; ``make -n`` shows the installs without running them).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(ROOT / name, tmp_path / name)
    return tmp_path


def fake_python(where: Path, version: str) -> Path:
    script = where / f"fake-python-{version}"
    script.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then\n'
        f'  mkdir -p "$3" && echo "version = {version}" > "$3/pyvenv.cfg"; exit 0\n'
        "fi\n"
        f"echo {version}\n"
    )
    script.chmod(0o755)
    return script


def make(checkout: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # Not the flags of a `make test` this suite may run under (-s, -j, -n...).
    env = {k: v for k, v in os.environ.items() if k not in {"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEFILES"}}
    return subprocess.run(
        ["make", "--no-print-directory", *args], cwd=checkout, env=env, capture_output=True, text=True, timeout=30
    )


@pytest.mark.parametrize("target", ["demo", "test", "lint", "venv"])
def test_a_python_older_than_3_11_is_refused_at_once_in_one_line(checkout: Path, target: str):
    old = fake_python(checkout, "3.10.13")
    done = make(checkout, target, f"PYTHON={old}")
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert "needs Python 3.11 or newer" in line and "is Python 3.10.13" in line
    assert not (checkout / ".venv").exists()  # checked before anything is made


def test_a_python_that_does_not_run_is_named(checkout: Path):
    done = make(checkout, "demo", "PYTHON=no-such-python3.11")
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert "needs Python 3.11 or newer" in line and "PYTHON=no-such-python3.11 does not run" in line


def test_clean_needs_no_interpreter(checkout: Path):
    assert make(checkout, "clean", "PYTHON=no-such-python3.11").returncode == 0


def test_a_venv_made_by_another_python_version_is_rebuilt(checkout: Path):
    venv = checkout / ".venv"
    venv.mkdir()
    (venv / "pyvenv.cfg").write_text("home = /somewhere\nversion = 3.12.1\n")
    (venv / "left-over").touch()
    python = fake_python(checkout, "3.11.7")

    done = make(checkout, ".venv/pyvenv.cfg", f"PYTHON={python}")
    assert done.returncode == 0, done.stderr
    assert ".venv was made by Python 3.12.1" in done.stdout and "rebuilding it" in done.stdout
    assert not (venv / "left-over").exists()
    assert "version = 3.11.7" in (venv / "pyvenv.cfg").read_text()

    # Same version: kept.
    (venv / "left-over").touch()
    assert make(checkout, ".venv/pyvenv.cfg", f"PYTHON={python}").returncode == 0
    assert (venv / "left-over").exists()


def test_the_demo_installs_the_local_extra_only_and_test_adds_dev_on_top(checkout: Path):
    python = fake_python(checkout, "3.11.7")
    demo = make(checkout, "-n", "demo", f"PYTHON={python}").stdout
    assert "-e '.[local]'" in demo and ".[dev]" not in demo
    assert demo.index("-m venv .venv") < demo.index("-e '.[local]'") < demo.index("python -m demo")

    test = make(checkout, "-n", "test", f"PYTHON={python}").stdout
    assert test.index("-e '.[local]'") < test.index("-e '.[dev]'")

    # Once the demo's install is there, `make test` only adds the dev extra on top.
    venv = checkout / ".venv"
    venv.mkdir()
    (venv / "pyvenv.cfg").write_text("version = 3.11.7\n")
    (venv / ".installed-local").touch()
    test = make(checkout, "-n", "test", f"PYTHON={python}").stdout
    assert "-m venv" not in test and ".[local]" not in test and "-e '.[dev]'" in test
