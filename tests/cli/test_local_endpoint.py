"""``python -m hexeract_scheduler.local``: its name in --help, and one line when moto is missing.

``--demo-targets`` is exercised by tests/cli/test_doc_snippets.py, whose endpoint it starts.
"""

from __future__ import annotations

import sys

import pytest

from hexeract_scheduler import local


def test_help_names_the_command_as_it_is_run(capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit) as exited:
        local.main(["--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m hexeract_scheduler.local ")
    assert "--port" in out and "--demo-targets" in out
    assert "local.py" not in out


def without_moto(monkeypatch: pytest.MonkeyPatch) -> None:
    """Imports of moto fail as in a plain `pip install hexeract-scheduler` (None in sys.modules makes
    Python raise ModuleNotFoundError, even for submodules this process already imported)."""
    for name in [n for n in sys.modules if n == "moto" or n.startswith("moto.")] + ["moto"]:
        monkeypatch.setitem(sys.modules, name, None)


def test_without_the_local_extra_the_command_exits_2_naming_it(monkeypatch, capsys):
    without_moto(monkeypatch)
    with pytest.raises(SystemExit) as exited:
        local.main(["--port", "0"])
    assert exited.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # no URL: nothing is served
    [line] = captured.err.splitlines()
    assert line.startswith("python -m hexeract_scheduler.local: the local endpoint needs moto")
    assert "pip install 'hexeract-scheduler[local]'" in line and "pip install -e '.[local]'" in line


def test_without_the_local_extra_starting_an_endpoint_raises_a_typed_error(monkeypatch):
    without_moto(monkeypatch)
    with pytest.raises(local.MissingLocalExtra, match=r"hexeract-scheduler\[local\]"):
        local.start_local_endpoint()
