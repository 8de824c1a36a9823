"""A fault-injecting TCP proxy on 127.0.0.1 (port 0) in front of a local endpoint.

The real boto3 wire path sees real network faults: ``reset`` closes a connection with a TCP reset
once the request has arrived (botocore: ConnectionClosedError), ``hang`` reads the request and never
answers (botocore: ReadTimeoutError, after the client's read timeout), ``pass`` forwards bytes. The
mode can change while clients are connected; it applies to each request read from then on.
"""

from __future__ import annotations

import contextlib
import select
import socket
import struct
import threading
from collections.abc import Iterator
from urllib.parse import urlparse


class FaultProxy:
    def __init__(self, upstream_url: str, mode: str = "pass") -> None:
        parsed = urlparse(upstream_url)
        self.upstream = (parsed.hostname or "127.0.0.1", parsed.port or 80)
        self.mode = mode
        self.faults = 0
        self._server = socket.create_server(("127.0.0.1", 0))
        self._server.settimeout(0.2)
        self._closed = threading.Event()
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self.url = f"http://127.0.0.1:{self._server.getsockname()[1]}"
        threading.Thread(target=self._accept, name="fault-proxy", daemon=True).start()

    def close(self) -> None:
        self._closed.set()
        self._server.close()
        with self._lock:
            for s in self._sockets:
                with contextlib.suppress(OSError):
                    s.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._server.accept()
            except (TimeoutError, OSError):
                continue
            with self._lock:
                self._sockets.append(client)
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        upstream: socket.socket | None = None
        try:
            while not self._closed.is_set():
                ready, _, _ = select.select([client] + ([upstream] if upstream else []), [], [], 0.2)
                for sock in ready:
                    data = sock.recv(65536)
                    if not data:
                        return
                    if sock is client:
                        if self.mode == "reset":
                            self.faults += 1
                            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                            return  # closing with linger 0 sends a RST
                        if self.mode == "hang":
                            self.faults += 1
                            self._closed.wait()  # swallow the request, never answer
                            return
                        if upstream is None:
                            upstream = socket.create_connection(self.upstream)
                            with self._lock:
                                self._sockets.append(upstream)
                        upstream.sendall(data)
                    else:
                        client.sendall(data)
        except OSError:
            return
        finally:
            for s in (client, upstream):
                if s is not None:
                    with contextlib.suppress(OSError):
                        s.close()


@contextlib.contextmanager
def fault_proxy(upstream_url: str, mode: str = "pass") -> Iterator[FaultProxy]:
    proxy = FaultProxy(upstream_url, mode)
    try:
        yield proxy
    finally:
        proxy.close()
