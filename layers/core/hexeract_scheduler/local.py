"""An in-process AWS endpoint (moto server) on 127.0.0.1, for tests, the demo and benchmarks.

Needs the ``dev`` extra (``moto[server]``); nothing in the Lambda path imports this module.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any


@dataclass
class LocalEndpoint:
    url: str
    server: Any

    def stop(self) -> None:
        self.server.stop()


def start_local_endpoint(port: int = 0) -> LocalEndpoint:
    """Start moto's threaded server on 127.0.0.1 (port 0: a free one) and return its URL."""
    from moto.server import ThreadedMotoServer

    # moto only needs some credentials and a region; real ones are never sent anywhere.
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    host, bound = server.get_host_and_port()
    return LocalEndpoint(f"http://{host}:{bound}", server)
