# hexeract-scheduler: `make demo`, `make test`, `make lint`, `make build`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: venv test lint demo build clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

test: $(STAMP)
	$(BIN)/pytest

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check layers functions tests
	$(BIN)/mypy

# Everything on this machine: a moto endpoint in-process, a worker, a consumer, the CLI (~30 s).
# `make demo DEMO_ARGS=--keep` keeps the endpoint up until Ctrl-C.
demo: $(STAMP)
	$(BIN)/python -m demo $(DEMO_ARGS)

clean:
	rm -rf $(VENV) .aws-sam .pytest_cache .mypy_cache .ruff_cache
