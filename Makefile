# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?=
# CrewAI pins openai<3, the OpenAI Agents SDK needs openai>=3: CrewAI gets its own venv
CREW_VENV ?= .venv-crewai

.PHONY: demo test test-crewai lint typecheck bench clean venv

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

test: $(VENV)/.installed-dev test-crewai
	$(BIN)/ruff check src tests bench examples
	$(BIN)/mypy
	$(BIN)/pytest -n 2 $(PYTEST_ARGS)

$(CREW_VENV)/.installed: pyproject.toml
	$(PY) -m venv $(CREW_VENV)
	$(CREW_VENV)/bin/python -m pip install -q --upgrade pip
	$(CREW_VENV)/bin/pip install -q -e '.[crewai-dev]'
	touch $@

test-crewai: $(CREW_VENV)/.installed
	$(CREW_VENV)/bin/pytest -p no:cacheprovider tests/integrations/test_crewai.py

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check src tests bench examples

typecheck: $(VENV)/.installed-dev
	$(BIN)/mypy

bench: $(VENV)/.installed-dev
	$(BIN)/icore bench core

clean:
	rm -rf $(VENV) $(CREW_VENV) build dist .pytest_cache .mypy_cache .ruff_cache results
