# hexeract-scheduler: `make demo`, `make test`, `make lint`, `make build`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: venv test lint demo build build-check clean bench torture

venv: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

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
# figures in bench/results/, summary in docs/benchmarks.md. Each prints the conditions it ran under.
bench: $(STAMP) $(DYNALITE)
	$(BIN)/python -c 'import matplotlib' 2>/dev/null || $(BIN)/pip install --quiet -e '.[bench]'
	$(BIN)/python -m bench.cost
	$(BIN)/python -m bench.coldstart
	$(BIN)/python -m bench.cpu
	$(BIN)/python -m bench.throughput
	$(BIN)/python -m bench.scaleout
	$(BIN)/python -m bench.lag

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check layers functions tests
	$(BIN)/mypy
	$(BIN)/cfn-lint template.yaml

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
# site-packages): the layer carries every dependency and both handlers cold-start.
build-check:
	@test -d .aws-sam/build/CoreLayer/python || { echo "no .aws-sam/build: run make build" >&2; exit 1; }
	cd .aws-sam/build/DispatcherFunction && env -i TABLE_NAME=build-check AWS_DEFAULT_REGION=us-east-1 \
	  PYTHONPATH=../CoreLayer/python "$(PY312_BIN)/python3.12" -S -c 'import app; assert callable(app.lambda_handler)'
	cd .aws-sam/build/DeadLetterFunction && env -i TABLE_NAME=build-check AWS_DEFAULT_REGION=us-east-1 \
	  PYTHONPATH=../CoreLayer/python "$(PY312_BIN)/python3.12" -S -c 'import app; assert callable(app.lambda_handler)'
	@echo "build-check: layer and handlers import under Python 3.12"

# Everything on this machine: a moto endpoint in-process, a worker, a consumer, the CLI (~20 s).
# `make demo DEMO_ARGS=--keep` keeps the endpoint up until Ctrl-C.
demo: $(STAMP)
	$(BIN)/python -m demo $(DEMO_ARGS)

clean:
	rm -rf $(VENV) .aws-sam .pytest_cache .mypy_cache .ruff_cache tools/dynalite/node_modules
