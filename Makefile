# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?=
# Arize Phoenix, the real OTLP receiver of the OpenTelemetry tests, in its own venv (its
# dependency tree is large and pinned): ~90 s and ~850 MB once (#16)
PHOENIX_VENV ?= .venv-phoenix

.PHONY: demo test lint typecheck bench clean venv phoenix

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

$(PHOENIX_VENV)/.installed:
	$(PY) -m venv $(PHOENIX_VENV)
	$(PHOENIX_VENV)/bin/python -m pip install -q --upgrade pip
	$(PHOENIX_VENV)/bin/pip install -q 'arize-phoenix>=13.15'
	touch $@

phoenix: $(PHOENIX_VENV)/.installed

demo: $(VENV)/.installed-run
	$(BIN)/icore demo

test: $(VENV)/.installed-dev $(PHOENIX_VENV)/.installed
	$(BIN)/ruff check src tests bench examples
	$(BIN)/mypy
	$(BIN)/pytest -n 2 $(PYTEST_ARGS)

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check src tests bench examples

typecheck: $(VENV)/.installed-dev
	$(BIN)/mypy

bench: $(VENV)/.installed-dev
	$(BIN)/icore bench core

clean:
	rm -rf $(VENV) $(PHOENIX_VENV) build dist .pytest_cache .mypy_cache .ruff_cache results
