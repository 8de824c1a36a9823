# hexeract-scheduler: `make demo`, `make test`, `make lint`, `make build`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/pip --quiet --disable-pip-version-check
# One venv, two installs. The demo's: the package and moto, the local AWS endpoint (the `local`
# extra). On top of it, for `make test` and `make lint`: the dev tools (the `dev` extra, a superset).
LOCAL_STAMP := $(VENV)/.installed-local
STAMP       := $(VENV)/.installed

.PHONY: venv test lint demo build build-check clean bench torture check-python FORCE

venv: $(STAMP)

# The interpreter, checked before anything is made with it: Python 3.11 or newer (pyproject.toml's
# requires-python). `make PYTHON=python3.12` (or a path, e.g. one of `pyenv root`/versions/*) picks another.
PY_VERSION := $(shell $(PYTHON) -c 'import platform; print(platform.python_version())' 2>/dev/null)
PY_MAJOR   := $(word 1,$(subst ., ,$(PY_VERSION)))
PY_MINOR   := $(word 2,$(subst ., ,$(PY_VERSION)))
PY_FOUND   := $(if $(PY_VERSION),is Python $(PY_VERSION),does not run)
PY_OK      := $(and $(filter 3,$(PY_MAJOR)),$(filter-out 0 1 2 3 4 5 6 7 8 9 10,$(PY_MINOR)))

# $(error) in a recipe fires only when the recipe runs (so `make clean` never checks), and prints
# one line.
check-python:
	$(if $(PY_OK),@true,$(error hexeract-scheduler needs Python 3.11 or newer: PYTHON=$(PYTHON) $(PY_FOUND); pass another, e.g. make PYTHON=python3.12))

# A .venv made by another Python version is rebuilt, not reused: its packages and scripts belong to
# that interpreter (and one that no longer exists fails every command). The version is read from
# .venv/pyvenv.cfg, which `python -m venv` writes; FORCE remakes the venv when they differ.
VENV_VERSION := $(shell sed -n 's/^version *= *//p' $(VENV)/pyvenv.cfg 2>/dev/null)
ifneq ($(wildcard $(VENV)/pyvenv.cfg),)
ifneq ($(VENV_VERSION),$(PY_VERSION))
VENV_STALE := FORCE
endif
endif

STALE_MESSAGE = make: .venv was made by Python $(or $(VENV_VERSION),unknown) and PYTHON=$(PYTHON) is $(PY_VERSION): rebuilding it

$(VENV)/pyvenv.cfg: $(VENV_STALE) | check-python
	$(if $(VENV_STALE),@echo "$(STALE_MESSAGE)")
	$(if $(VENV_STALE),rm -rf $(VENV))
	@echo "make: creating .venv with $(PYTHON) (Python $(PY_VERSION))"
	$(PYTHON) -m venv $(VENV)

# The demo's install, kept short for a fresh `make demo`: a current pip first (it resolves the
# install in about half the time of the one `python -m venv` bundles), and no build isolation
# (setuptools, the build requirement, is installed once instead of into a throwaway environment for
# every editable build). Bytecode is compiled here: with PYTHONDONTWRITEBYTECODE set, nothing would
# ever compile it, and every command would compile boto3 again.
$(LOCAL_STAMP): pyproject.toml $(VENV)/pyvenv.cfg
	@echo "make: installing hexeract-scheduler (editable) and moto, its local AWS endpoint (extra 'local'), into .venv (~20 s)"
	$(PIP) install --upgrade pip 'setuptools>=77'
	$(PIP) install --no-build-isolation -e '.[local]'
	touch $@

# On top of the demo's install: only what it lacks is installed (and the editable package, again).
$(STAMP): $(LOCAL_STAMP)
	@echo "make: installing the dev tools (pytest, ruff, mypy and stubs, cfn-lint; extra 'dev') into .venv"
	$(PIP) install --no-build-isolation -e '.[dev]'
	touch $@

FORCE:

# dynalite, the second DynamoDB of the test suite (tests/conftest.py), pinned by
# tools/dynalite/package-lock.json and installed there, never globally.
DYNALITE := tools/dynalite/node_modules/dynalite/package.json

$(DYNALITE): tools/dynalite/package.json tools/dynalite/package-lock.json
	@command -v npm >/dev/null || { echo "make test needs Node.js and npm (for dynalite)" >&2; exit 1; }
	npm ci --prefix tools/dynalite --ignore-scripts --no-audit --no-fund --loglevel=error
	touch $(DYNALITE)

test: $(STAMP) $(DYNALITE)
	$(BIN)/pytest

# Full-size torture tests (racing workers, kill -9, sink faults): several minutes.
torture: $(STAMP) $(DYNALITE)
	$(BIN)/pytest -m torture -s tests/torture

# Benchmarks (a few minutes): DynamoDB on dynalite and moto, SQS/SNS on moto, all on 127.0.0.1;
# figures in bench/results/, each with the conditions it ran under; then tools/render_docs.py renders
# the docs' figures (docs/benchmarks.md, the README) from them.
bench: $(STAMP) $(DYNALITE)
	$(BIN)/python -c 'import matplotlib' 2>/dev/null || $(BIN)/pip install --quiet -e '.[bench]'
	$(BIN)/python -m bench.cost
	$(BIN)/python -m bench.coldstart
	$(BIN)/python -m bench.cpu
	$(BIN)/python -m bench.throughput
	$(BIN)/python -m bench.scaleout
	$(BIN)/python -m bench.lag
	$(BIN)/python tools/render_docs.py

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check layers functions tests tools
	$(BIN)/mypy
	$(BIN)/python tools/dispatcher_slots.py --check
	$(BIN)/python tools/render_docs.py --check
	$(BIN)/cfn-lint template.yaml tools/dispatcher_slot.yaml

# `sam build` without Docker. The layer is built (pip, for arm64) by the Lambda runtime's Python,
# 3.12, taken from pyenv. aws-sam-cli is heavy and pins its own dependencies, so it gets a venv of
# its own (.venv/sam), installed on first use, never the dev extra.
PYENV_ROOT ?= $(shell pyenv root 2>/dev/null || echo $$HOME/.pyenv)
PY312_BIN  ?= $(lastword $(sort $(wildcard $(PYENV_ROOT)/versions/3.12.*/bin)))
SAM        := $(VENV)/sam/bin/sam

$(SAM):
	$(PYTHON) -m venv $(VENV)/sam
	$(VENV)/sam/bin/pip install --quiet aws-sam-cli

build: $(SAM)
	@test -x "$(PY312_BIN)/python3.12" || { echo "make build needs Python 3.12 (pyenv install 3.12)" >&2; exit 1; }
	PATH="$(PY312_BIN):$$PATH" SAM_CLI_TELEMETRY=0 $(SAM) build --template-file template.yaml
	$(MAKE) build-check

# The built artefacts import under Python 3.12 with nothing but the layer on the path (-S: no
# site-packages): every module the layer ships, and both handlers (tools/check_layer.py).
build-check:
	@test -d .aws-sam/build/CoreLayer/python || { echo "no .aws-sam/build: run make build" >&2; exit 1; }
	env -i PATH="$$PATH" "$(PY312_BIN)/python3.12" -S tools/check_layer.py .aws-sam/build

# Everything on this machine: a moto endpoint in-process, a worker, a consumer, the CLI (~20 s;
# under 45 s from a fresh clone, installs included). It needs only the demo's install.
# `make demo DEMO_ARGS=--keep` keeps the endpoint up until Ctrl-C.
demo: $(LOCAL_STAMP)
	@echo "make: running the demo: python -m demo $(DEMO_ARGS)"
	$(BIN)/python -m demo $(DEMO_ARGS)

clean:
	rm -rf $(VENV) .aws-sam .pytest_cache .mypy_cache .ruff_cache tools/dynalite/node_modules
