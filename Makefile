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

# --- experiments ---
# One target per paper artifact: measure it (resumably) and draw it beside the paper's values; `report` writes
# results/REPORT.md and .html from whatever the store holds. Options: MODELS=llama3-8b,phi3-3.8b (default: the
# embedded smollm2-135m), DATASETS=lambada,mmlu, FLASH_MBPS=200 (emulate phone flash; fig10 and table3),
# LAUNCHER=local_parallel|slurm (accuracy and perplexity sweeps through a Hydra launcher; docs/scale-out.md),
# EXP_ARGS='experiment.repetitions=5' (more options or Hydra overrides for every point).
ARTIFACTS := fig10 table3 table4 table5 fig12 fig13 fig4
EXP_SELECT = $(if $(MODELS),--models $(MODELS)) $(if $(DATASETS),--datasets $(DATASETS)) $(if $(LAUNCHER),--launcher $(LAUNCHER))
reproduce-fig10 reproduce-table3: EXP_FLASH = $(if $(FLASH_MBPS),--flash-mbps $(FLASH_MBPS))
reproduce-fig13 reproduce-fig4: EXP_SELECT =
.PHONY: report reproduce-all $(addprefix reproduce-,$(ARTIFACTS))

$(addprefix reproduce-,$(ARTIFACTS)): reproduce-%: setup
	$(PY) -m experiments run $* $(EXP_SELECT) $(EXP_FLASH) $(EXP_ARGS)

reproduce-all: setup $(addprefix reproduce-,$(ARTIFACTS))
	$(PY) -m experiments report

report: setup
	$(PY) -m experiments report
