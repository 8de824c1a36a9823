"""An in-process AWS endpoint (moto server) on 127.0.0.1, for tests, the demo and benchmarks.

Needs the ``dev`` extra (``moto[server]``); nothing in the Lambda path imports this module.

moto's server handles concurrent requests on several threads with no lock around a request, so two
conditional writes to one item can both pass their condition (and a Query can crash while another
request removes an index key). DynamoDB applies each item write atomically; to model that, this
endpoint serialises requests by default (``serialize=True``). moto is CPU-bound under the GIL, so
this costs little throughput, but an SQS long poll (``WaitTimeSeconds`` > 0) would block every
other request: poll with ``WaitTimeSeconds=0`` against it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any


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


class _Serialized:
    """WSGI middleware: one request at a time, response body included."""

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self.app = app
        self.lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        with self.lock:
            return list(self.app(environ, start_response))


def start_local_endpoint(port: int = 0, *, serialize: bool = True) -> LocalEndpoint:
    """Start a moto server on 127.0.0.1 (port 0: a free one) in a daemon thread; return its URL."""
    from moto.moto_server.threaded_moto_server import MotoRequestHandler
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import make_server

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


def spawn_local_endpoint(*, serialize: bool = True, timeout: float = 30.0) -> LocalEndpoint:
    """The same endpoint in a child process: its work does not compete for this process's GIL
    (several times faster when this process runs busy worker threads), and it dies with ``stop()``.
    """
    args = [sys.executable, "-m", "hexeract_scheduler.local"] + ([] if serialize else ["--concurrent"])
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    return LocalEndpoint(_first_line(process, timeout, "moto"), process=process)


def spawn_dynalite(server_js: str | os.PathLike[str], *, timeout: float = 30.0) -> LocalEndpoint:
    """dynalite (a DynamoDB implementation in Node.js that applies DynamoDB's request validation)
    on a free 127.0.0.1 port, in a child process; ``server_js`` is the repository's
    ``tools/dynalite/serve.js`` (``make test`` installs dynalite beside it).

    The child reads our end of a pipe on its stdin and exits when it closes, so it dies with this
    process even on ``kill -9``.
    """
    if shutil.which("node") is None:
        raise RuntimeError("dynalite needs Node.js: `node` is not on PATH")
    if not (Path(server_js).parent / "node_modules" / "dynalite").is_dir():
        raise RuntimeError(f"dynalite is not installed beside {server_js}: run `make test` (it runs npm ci there)")
    # stderr to a file, not a pipe: nobody reads it while the server runs, and a full pipe would
    # block the server.
    errors = tempfile.TemporaryFile("w+")  # noqa: SIM115 (kept open for the endpoint's life: check_alive reads it)
    process = subprocess.Popen(
        ["node", str(server_js)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors, text=True
    )
    return LocalEndpoint(_first_line(process, timeout, "dynalite", errors), process=process, errors=errors)


def _first_line(process: subprocess.Popen[str], timeout: float, what: str, errors: IO[str] | None = None) -> str:
    """The URL a child endpoint prints once it listens (or kill it and say why it did not)."""
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


def main() -> None:
    """``python -m hexeract_scheduler.local [--port N] [--concurrent]``: print the URL, serve."""
    import argparse
    import signal

    parser = argparse.ArgumentParser(description="A local AWS endpoint (moto) on 127.0.0.1.")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--concurrent", action="store_true", help="do not serialise requests")
    opts = parser.parse_args()
    endpoint = start_local_endpoint(opts.port, serialize=not opts.concurrent)
    print(endpoint.url, flush=True)
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
