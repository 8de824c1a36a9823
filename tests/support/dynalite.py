"""dynalite, the suite's second DynamoDB (and the benchmarks'): started in a child process."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from hexeract_scheduler.local import LocalEndpoint, wait_for_url

# ``make test`` installs dynalite beside its server script (npm ci in tools/dynalite).
DYNALITE_SERVER = Path(__file__).resolve().parents[2] / "tools" / "dynalite" / "serve.js"


def spawn_dynalite(server_js: str | os.PathLike[str] = DYNALITE_SERVER, *, timeout: float = 30.0) -> LocalEndpoint:
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
    return LocalEndpoint(wait_for_url(process, timeout, "dynalite", errors), process=process, errors=errors)
