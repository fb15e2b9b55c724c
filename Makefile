# EdgeFlow-Bench. Every target depends on `setup`, so any of them works as the first command on a new machine.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export PYTHONPATH := $(CURDIR)

.PHONY: setup test test-fast help

help:
	@echo "make setup            create $(VENV): torch==2.13.0 (CPU) first, then the harness and its dependencies"
	@echo "make test             the whole test suite (fast tests plus the real-model tests; what CI runs)"

setup: $(STAMP)

# torch first and pinned: any other torch spec pulls a multi-GB CUDA build.
$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev,launchers]'
	touch $@

test: setup
	$(PY) -m pytest -q

test-fast: setup
	$(PY) -m pytest -q -m "not real_model and not slow"

# --- quant ---
.PHONY: bench-quant
bench-quant: setup  ## time calibration + quantization (default model, and a random Llama at 1x and 2x width)
	$(PY) -m harness.quant.bench --threads 1
	$(PY) -m harness.quant.bench --threads 2
