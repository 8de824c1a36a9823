"""Run by ``make build-check`` under the Lambda runtime's Python, with nothing but the built layer
on the path (``python3.12 -S``): every module the layer ships imports with what the layer
installs, the command line and the local endpoint are not in it, and each function's handler
cold-starts.

    python3.12 -S tools/check_layer.py .aws-sam/build
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import sys
from pathlib import Path

NOT_IN_LAYER = ("hexeract_scheduler.cli", "hexeract_scheduler.local")
FUNCTIONS = ("DispatcherFunction", "DeadLetterFunction")


def main(build: Path) -> None:
    layer = build / "CoreLayer" / "python"
    sys.path[:0] = [str(layer)]
    os.environ.update(TABLE_NAME="build-check", AWS_DEFAULT_REGION="us-east-1")
    import hexeract_scheduler

    shipped = [m.name for m in pkgutil.walk_packages(hexeract_scheduler.__path__, "hexeract_scheduler.")]
    for name in shipped:
        importlib.import_module(name)
    stray = [name for name in shipped if name.startswith(NOT_IN_LAYER)]
    assert not stray, f"the layer ships {stray}, which need what it does not install"
    for function in FUNCTIONS:
        sys.path.insert(0, str(build / function))
        app = importlib.import_module("app")
        assert callable(app.lambda_handler), function
        del sys.modules["app"]
        sys.path.pop(0)
    version = sys.version.split()[0]
    print(f"build-check: the layer's {len(shipped)} modules and both handlers import under Python {version}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
