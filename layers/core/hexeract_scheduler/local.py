"""A local AWS endpoint (moto server) on 127.0.0.1, for the tour, the demo, tests and benchmarks.

``python -m hexeract_scheduler.local [--port N] [--demo-targets]`` serves one until Ctrl-C.
Needs the ``local`` extra (moto; ``dev`` includes it): without it, starting an endpoint raises
:class:`MissingLocalExtra`, and the command exits 2 with one line naming the extra. Nothing in the
Lambda path imports this module.

moto's server handles concurrent requests on several threads with no lock around a request, so two
conditional writes to one item can both pass their condition (and a Query can crash while another
request removes an index key). DynamoDB applies each item write atomically; to model that, this
endpoint serialises requests by default (``serialize=True``). moto is CPU-bound under the GIL, so
this costs little throughput, but an SQS long poll (``WaitTimeSeconds`` > 0) would block every
other request: poll with ``WaitTimeSeconds=0`` against it.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import shlex
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

PROG = "python -m hexeract_scheduler.local"
LOCAL_EXTRA_INSTALL = "pip install 'hexeract-scheduler[local]' (from a clone: pip install -e '.[local]')"
# What --demo-targets creates (the names the demo uses too).
DEMO_QUEUE = "reminders"
DEMO_TOPIC = "reminders-topic"


class MissingLocalExtra(ModuleNotFoundError):
    """moto (or the web server it runs on) is not installed: the ``local`` extra is missing."""


@dataclass
class LocalEndpoint:
    """A running endpoint: a server thread in this process, or a child process."""

    url: str
    server: Any = None
    thread: threading.Thread | None = None
    process: subprocess.Popen[str] | None = None
    errors: IO[str] | None = None  # a child's stderr

    def check_alive(self) -> None:
        """Raise, with the end of its stderr, if the child process has exited."""
        if self.process is None or self.process.poll() is None:
            return
        tail = ""
        if self.errors is not None:
            self.errors.seek(0)
            tail = self.errors.read().strip()[-1000:]
        raise RuntimeError(f"the endpoint at {self.url} exited with status {self.process.returncode}: {tail}")

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
        if self.thread is not None:
            self.thread.join(timeout=5)
        if self.process is not None:
            if self.process.stdin is not None:
                self.process.stdin.close()
            self.process.terminate()
            if self.errors is not None:
                self.errors.close()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            if self.process.stdout is not None:
                self.process.stdout.close()


class _Serialized:
    """WSGI middleware: one request at a time, response body included."""

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self.app = app
        self.lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        with self.lock:
            return list(self.app(environ, start_response))


def start_local_endpoint(port: int = 0, *, serialize: bool = True) -> LocalEndpoint:
    """Start a moto server on 127.0.0.1 (port 0: a free one) in a daemon thread; return its URL.

    Raises :class:`MissingLocalExtra` when moto is not installed."""
    try:
        from moto.moto_server.threaded_moto_server import MotoRequestHandler
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
        from werkzeug.serving import make_server
    except ModuleNotFoundError as exc:
        raise MissingLocalExtra(
            f"the local endpoint needs moto (module {exc.name!r} is missing): {LOCAL_EXTRA_INSTALL}", name=exc.name
        ) from exc

    # moto needs some credentials and a region; real ones are never sent anywhere.
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one log line per request otherwise
    app: Any = DomainDispatcherApplication(create_backend_app)
    if serialize:
        app = _Serialized(app)
    server = make_server("127.0.0.1", port, app, threaded=True, request_handler=MotoRequestHandler)
    thread = threading.Thread(target=server.serve_forever, name="moto-server", daemon=True)
    thread.start()
    bound = server.server_address[1]
    return LocalEndpoint(f"http://127.0.0.1:{bound}", server=server, thread=thread)


def spawn_local_endpoint(*, serialize: bool = True, demo_targets: bool = False, timeout: float = 30.0) -> LocalEndpoint:
    """The same endpoint in a child process: its work does not compete for this process's GIL
    (several times faster when this process runs busy worker threads), and it dies with ``stop()``.
    With ``demo_targets``, the lines it prints after the URL are left to read on ``process.stdout``.
    """
    args = [sys.executable, "-m", "hexeract_scheduler.local"]
    args += ([] if serialize else ["--concurrent"]) + (["--demo-targets"] if demo_targets else [])
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    return LocalEndpoint(wait_for_url(process, timeout, "moto"), process=process)


def wait_for_url(process: subprocess.Popen[str], timeout: float, what: str, errors: IO[str] | None = None) -> str:
    """The URL a child endpoint prints as its first line once it listens (or kill it and say why it
    did not); ``errors``, the child's stderr as a file, goes into the message."""
    assert process.stdout is not None
    ready: list[str] = []
    reader = threading.Thread(target=lambda: ready.append(process.stdout.readline()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    reader.join(timeout)
    line = ready[0].strip() if ready else ""
    if not line.startswith("http://"):
        process.kill()
        process.wait()
        err = ""
        if errors is not None:
            errors.seek(0)
            err = errors.read().strip()[-500:]
        raise RuntimeError(f"the local {what} endpoint did not start (got {line!r}) {err}".strip())
    return line


def create_demo_targets(url: str) -> tuple[str, str]:
    """Create (idempotently) the queue and topic the README's tour and the demo send to, on the
    endpoint at ``url``; return the queue's URL and the topic's ARN."""
    from hexeract_scheduler.aws.clients import ClientFactory, Connection

    clients = ClientFactory(Connection.parse(url))
    queue_url = clients.sqs().create_queue(QueueName=DEMO_QUEUE)["QueueUrl"]
    topic_arn = clients.sns().create_topic(Name=DEMO_TOPIC)["TopicArn"]
    return queue_url, topic_arn


def export_lines(url: str, queue_url: str, topic_arn: str) -> list[str]:
    """Shell lines that, pasted into another terminal, point ``hexeract`` at this endpoint and
    define ``QUEUE_URL`` and ``TOPIC_ARN``; with a ``PATH`` line first when this interpreter's
    directory holds the ``hexeract`` script (a venv's bin: not on a new terminal's PATH)."""
    lines = []
    bin_dir = Path(sys.executable).parent  # not resolved: a venv's python is a link out of it
    if (bin_dir / "hexeract").exists():
        lines.append(f'export PATH={shlex.quote(str(bin_dir.absolute()))}:"$PATH"')
    lines.append(
        f"export HEXERACT_CONN={shlex.quote(url)} QUEUE_URL={shlex.quote(queue_url)} TOPIC_ARN={shlex.quote(topic_arn)}"
    )
    return lines


def main(argv: Sequence[str] | None = None) -> None:
    """Print the URL (always the first line: :func:`spawn_local_endpoint` reads it), and with
    ``--demo-targets`` the export lines for the queue and topic it created; serve until Ctrl-C,
    SIGTERM, or the parent process exits."""
    import signal

    parser = argparse.ArgumentParser(
        prog=PROG, description="A local AWS endpoint (moto: DynamoDB, SQS, SNS) on 127.0.0.1."
    )
    parser.add_argument("--port", type=int, default=0, help="port to listen on (default 0: a free one)")
    parser.add_argument("--concurrent", action="store_true", help="do not serialise requests")
    parser.add_argument(
        "--demo-targets",
        action="store_true",
        help=f"create a queue ({DEMO_QUEUE}) and a topic ({DEMO_TOPIC}) and print shell lines exporting "
        "HEXERACT_CONN, QUEUE_URL and TOPIC_ARN",
    )
    opts = parser.parse_args(argv)
    try:
        endpoint = start_local_endpoint(opts.port, serialize=not opts.concurrent)
    except MissingLocalExtra as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        sys.exit(2)
    print(endpoint.url, flush=True)
    if opts.demo_targets:
        queue_url, topic_arn = create_demo_targets(endpoint.url)
        print(f"# created queue {DEMO_QUEUE} and topic {DEMO_TOPIC}; paste into another terminal:")
        for line in export_lines(endpoint.url, queue_url, topic_arn):
            print(line)
        print("# serving until Ctrl-C", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    parent = os.getppid()

    def watch_parent() -> None:  # a test run killed hard must not leave its endpoint behind
        while not stop.wait(1.0):
            if os.getppid() != parent:
                stop.set()

    threading.Thread(target=watch_parent, daemon=True).start()
    with contextlib.suppress(KeyboardInterrupt):
        stop.wait()
    endpoint.stop()


if __name__ == "__main__":
    main()
