"""A TCP proxy on 127.0.0.1 that delays every request by a fixed time: a network round trip.

    python -m bench.latencyproxy --latency-ms 10 http://127.0.0.1:PORT [http://127.0.0.1:PORT2 ...]

prints one proxied URL per upstream, in order, one per line, then serves until its stdin closes
(the parent went away, even by kill -9) or it gets SIGTERM. Bytes from the client are forwarded
``latency`` after they arrived, in order; answers come back at once. botocore sends one request at
a time on a connection, so each request waits the whole round trip *while holding its pooled
connection*, as a request to a remote AWS endpoint does (a ``before-send`` hook that sleeps holds
no connection). The delay is applied to arrival times, so a request split over several TCP
segments is delayed once, not once per segment.

asyncio, one thread, in a process of its own: its work competes for a core but not for the GIL of
the process being measured. The same pattern as tests/faultproxy.py (a thread per connection),
which is fine for faults but too heavy for hundreds of requests a second.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import socket
import sys
import threading
from typing import Any
from urllib.parse import urlparse


async def _pump_delayed(queue: asyncio.Queue[tuple[float, bytes]], writer: asyncio.StreamWriter) -> None:
    loop = asyncio.get_running_loop()
    while True:
        due, data = await queue.get()
        if not data:
            break
        wait = due - loop.time()
        if wait > 0:
            await asyncio.sleep(wait)
        writer.write(data)
        await writer.drain()


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(65536):
        writer.write(data)
        await writer.drain()


class Proxy:
    def __init__(self, upstream: str, latency: float) -> None:
        parsed = urlparse(upstream)
        self.host = parsed.hostname or "127.0.0.1"
        self.port = parsed.port or 80
        self.latency = latency

    async def handle(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        loop = asyncio.get_running_loop()
        try:
            up_r, up_w = await asyncio.open_connection(self.host, self.port)
        except OSError:
            client_w.close()
            return
        for w in (client_w, up_w):
            sock = w.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def read_client() -> None:
            try:
                while data := await client_r.read(65536):
                    queue.put_nowait((loop.time() + self.latency, data))
            finally:
                queue.put_nowait((0.0, b""))  # the client closed (or reset): end the delayed pump

        tasks = [
            asyncio.ensure_future(read_client()),
            asyncio.ensure_future(_pump_delayed(queue, up_w)),  # ends once the client closed
            asyncio.ensure_future(_pump(up_r, client_w)),  # ends once the upstream closed
        ]
        try:
            await asyncio.wait(tasks[1:], return_when=asyncio.FIRST_COMPLETED)
        except BaseException:  # cancelled with the loop, or a reset connection
            pass
        finally:
            for t in tasks:
                t.cancel()
            for w in (client_w, up_w):
                with contextlib.suppress(Exception):
                    w.close()
            with contextlib.suppress(BaseException):
                await asyncio.gather(*tasks, return_exceptions=True)


_live: set[asyncio.Task[None]] = set()


def _keep(handle: Any) -> Any:
    """Connection handlers as tasks held here: asyncio keeps only weak references to tasks."""

    def start(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.ensure_future(handle(reader, writer))
        _live.add(task)
        task.add_done_callback(_live.discard)

    return start


async def serve(upstreams: list[str], latency: float) -> None:
    loop = asyncio.get_running_loop()
    servers = []
    for up in upstreams:
        server = await asyncio.start_server(_keep(Proxy(up, latency).handle), "127.0.0.1", 0, backlog=512)
        servers.append(server)
        print(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", flush=True)
    done = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, done.set)
    loop.add_signal_handler(signal.SIGINT, done.set)

    def watch_stdin() -> None:
        sys.stdin.buffer.read()
        loop.call_soon_threadsafe(done.set)  # stdin closed: the parent is gone

    threading.Thread(target=watch_stdin, daemon=True).start()
    await done.wait()
    # Connections still open are simply dropped with the process (no orderly close to wait for).
    os._exit(0)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--latency-ms", type=float, required=True)
    p.add_argument("upstream", nargs="+")
    args = p.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args.upstream, args.latency_ms / 1000))


if __name__ == "__main__":
    main()
