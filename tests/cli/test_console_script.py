"""The installed ``hexeract`` console script, in real processes: exit codes, one-line errors, Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from datetime import datetime
from pathlib import Path

import pytest

from hexeract_scheduler import ScheduledMessage
from hexeract_scheduler.cli import worker
from hexeract_scheduler.domain.clock import UTC

from ..conftest import Queue, unique
from ..support.faultproxy import fault_proxy

UNKNOWN = "01900000-0000-7000-8000-000000000000"
SCRIPT = Path(sys.executable).with_name("hexeract")


def command() -> list[str]:
    """The console script if the package is installed in this interpreter's environment, else the module."""
    return [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "hexeract_scheduler.cli"]


def run_all(*commands: list[str], env: dict[str, str]) -> list[tuple[int, str, str]]:
    """Run the commands concurrently (each one pays the interpreter's start-up)."""
    procs = [
        subprocess.Popen([*command(), *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for args in commands
    ]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        results.append((proc.returncode, out, err))
    return results


@pytest.fixture
def env(backend, store) -> dict[str, str]:
    """The console script in its own process: on moto through ``--conn``'s URL; on dynalite through
    the standard per-service endpoint variables (``HEXERACT_CONN=aws``: boto3's own resolution)."""
    if backend.name == "moto":
        return {**os.environ, "HEXERACT_CONN": backend.aws_url, "HEXERACT_TABLE": store.table_name}
    return {**os.environ, **backend.env, "HEXERACT_CONN": "aws", "HEXERACT_TABLE": store.table_name}


def test_console_script_exit_codes_and_no_traceback(env, queue: Queue):
    added, missing, unreachable, usage = run_all(
        ["scheduler", "add", "--at", "+1h", "--target", queue.target],
        ["scheduler", "inspect", UNKNOWN],
        ["scheduler", "list", "--conn", "http://127.0.0.1:1"],
        ["scheduler", "dead-letter", "replay", UNKNOWN, "--format", "json"],
        env=env,
    )
    code, out, err = added
    assert code == 0 and err == "", err
    assert str(uuid.UUID(out.strip())) == out.strip()

    code, out, err = missing
    assert (code, out, err) == (1, "", f"error: schedule {UNKNOWN} not found\n")

    code, out, err = unreachable
    assert code == 1 and out == "" and len(err.splitlines()) == 1
    assert err.startswith("error: ") and "cannot reach" in err

    code, out, err = usage
    assert code == 2 and "Usage:" in err and "Traceback" not in err


def test_module_entry_point(env):
    result = subprocess.run(
        [sys.executable, "-m", "hexeract_scheduler.cli", "scheduler", "table", "create", "--table", unique("mod")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("created table ")


def start_worker(env: dict[str, str]) -> subprocess.Popen[str]:
    """``hexeract scheduler worker`` in its loop (its Ctrl-C handler installed)."""
    proc = subprocess.Popen(
        [*command(), "scheduler", "worker"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stderr is not None
    started = proc.stderr.readline()
    assert started.startswith("worker polling "), started
    return proc


def test_worker_stops_cleanly_on_ctrl_c_then_exits_130(env, queue: Queue):
    """The first Ctrl-C finishes the cycle (within the stop grace), prints the summary, and exits
    130 like any command Ctrl-C ended; the one line on stderr is the notice it gave."""
    proc = start_worker(env)
    try:
        time.sleep(0.3)
        started = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
        elapsed = time.monotonic() - started
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert err == "stopping after this cycle (Ctrl-C again to abort)\n", err
    assert elapsed < worker.STOP_GRACE_SECONDS + 5
    assert set(json.loads(out)) >= {"claimed", "dispatched", "retried", "dead_lettered", "swept"}


def test_a_second_ctrl_c_aborts_the_worker_with_130_and_no_traceback(env, queue: Queue):
    proc = start_worker(env)
    try:
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        assert proc.stderr is not None
        assert proc.stderr.readline().startswith("stopping after this cycle")  # the handler ran
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err and len(err.splitlines()) <= 1, err  # "interrupted", unless it had stopped


def test_ctrl_c_during_a_hung_request_exits_130_with_one_line(backend, store):
    """`list` waits on a DynamoDB that never answers: Ctrl-C ends it at once, exit 130, one line."""
    with fault_proxy(backend.dynamodb_url) as proxy:
        proxy.mode = "hang"
        env = {**os.environ, **backend.env, "AWS_ENDPOINT_URL_DYNAMODB": proxy.url, "HEXERACT_CONN": "aws"}
        proc = subprocess.Popen(
            [*command(), "scheduler", "list", "--table", store.table_name],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 20
            while proxy.faults == 0 and time.monotonic() < deadline:  # the request is in the proxy
                time.sleep(0.05)
            assert proxy.faults > 0
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=20)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert (proc.returncode, out, err) == (130, "", "interrupted\n")


def test_a_worker_exits_within_a_few_seconds_of_for_while_dynamodb_hangs(backend, store, queue: Queue):
    """DynamoDB stops answering once the worker runs (connections accepted, never answered):
    `worker --for 2` still exits about the stop grace after 2 s, not after read timeouts x
    retries, with its summary and exit 0."""
    store.insert(ScheduledMessage.delay(queue.target, at=datetime.now(UTC)), datetime.now(UTC))
    with fault_proxy(backend.dynamodb_url) as proxy:
        env = {**os.environ, **backend.env, "AWS_ENDPOINT_URL_DYNAMODB": proxy.url, "HEXERACT_CONN": "aws"}
        proc = subprocess.Popen(
            [*command(), "scheduler", "worker", "--for", "2", "--table", store.table_name],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        started = time.monotonic()
        while "polling" not in (proc.stderr.readline() if proc.stderr else "polling"):
            pass
        proxy.mode = "hang"
        out, err = proc.communicate(timeout=60)
        elapsed = time.monotonic() - started
    assert proc.returncode == 0, err
    assert elapsed < 2 + worker.STOP_GRACE_SECONDS + 2.0, f"exited {elapsed:.1f}s after starting to poll"
    assert set(json.loads(out.strip().splitlines()[-1])) >= {"claimed", "dispatched"}


# -- shell completion (docs/cli.md#shell-completion) ---------------------------------------------


def complete(*words: str, env: dict[str, str] | None = None) -> list[str]:
    """What bash completion offers after ``hexeract WORDS`` (the last word being typed)."""
    completion_env = {
        **(env or os.environ),
        "_HEXERACT_COMPLETE": "bash_complete",
        "COMP_WORDS": " ".join(["hexeract", *words]),
        "COMP_CWORD": str(len(words)),
    }
    result = subprocess.run(command(), env=completion_env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


@pytest.mark.parametrize(
    ("shell", "marks"),
    [
        ("bash", ["_hexeract_completion()", "complete -o nosort -F _hexeract_completion hexeract"]),
        ("zsh", ["#compdef hexeract", "compdef _hexeract_completion hexeract"]),
        ("fish", ["complete --no-files --command hexeract"]),
    ],
)
def test_completion_scripts_for_bash_zsh_and_fish(shell, marks):
    env = {**os.environ, "_HEXERACT_COMPLETE": f"{shell}_source"}
    result = subprocess.run(command(), env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    for mark in marks:
        assert mark in result.stdout, (shell, mark)


def test_completion_completes_commands_options_and_choices():
    assert complete("sch") == ["plain,scheduler"]
    assert complete("scheduler", "dead") == ["plain,dead-letter"]
    assert "plain,--stack" in complete("scheduler", "list", "--")
    assert complete("scheduler", "list", "--format", "") == ["plain,text", "plain,json"]


@pytest.mark.skipif(not SCRIPT.exists(), reason="the hexeract console script is not installed")
def test_the_documented_bash_line_installs_the_completion():
    env = {**os.environ, "PATH": f"{SCRIPT.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    documented = 'eval "$(_HEXERACT_COMPLETE=bash_source hexeract)"'
    assert documented in (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text()
    line = f"{documented} && complete -p hexeract"
    result = subprocess.run(["bash", "-c", line], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "complete -o nosort -F _hexeract_completion hexeract"
