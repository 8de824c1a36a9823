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

import logging
import os
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any


@dataclass
class LocalEndpoint:
    url: str
    server: Any
    thread: threading.Thread

    def stop(self) -> None:
        self.server.shutdown()
        self.thread.join(timeout=5)


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
    return LocalEndpoint(f"http://127.0.0.1:{bound}", server, thread)
