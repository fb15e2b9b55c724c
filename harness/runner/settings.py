"""Each experiment kind's settings (`experiment.extra` in conf/experiment/*.yaml), one typed dataclass per kind,
validated when the job is prepared (harness/runner/kinds.py settings_of) like every config group: an unknown key or
a bad value is a ConfigError naming `experiment.extra.<key>` before any work starts. Kinds read
`job.settings.<key>`, never the raw dict.

A key that another kind takes is not unknown: a sweep over several kinds (experiment=accuracy,perplexity) may pass
`++experiment.extra.ppl_window=128` to all of them, and the kinds that have no such setting leave it alone."""
from __future__ import annotations

from dataclasses import dataclass

from harness.config import require
from harness.engine.run import DEFAULT_THREADS

WEIGHT_BITS = 8  # a baseline's weight bits (System.weight_bits): llama.cpp Q8_0, MNN INT8


def _positive(key: str, value, allow_none: bool = False) -> None:
    ok = (value is None and allow_none) or (value is not None and int(value) == value and int(value) >= 1)
    require(ok, f"experiment.extra.{key}", f"must be a positive integer{' or null' if allow_none else ''}, got {value!r}")


def _bits(value) -> None:
    require(0 < float(value) <= 16, "experiment.extra.bits", f"must lie in (0, 16], got {value!r}")


EVALUATORS = ("fake-quant", "runtime")  # AccuracySettings.evaluator
SPLITS = {"edgeflow": "EdgeFlow: 7 matmuls", "llmnpu": "llm.npu: coarse, 2 graphs"}  # what of a layer the NPU runs


@dataclass(frozen=True)
class NpuCompileSettings:
    split: str = "edgeflow"  # EdgeFlow's placement (harness/npu/graph.py) or llm.npu's (harness/npu/coarse.py)

    def __post_init__(self):
        require(self.split in SPLITS, "experiment.extra.split", f"must be one of {', '.join(SPLITS)}, got {self.split!r}")


@dataclass(frozen=True)
class PerplexitySettings:
    ppl_source: str = "local"  # local: the corpus's perplexity split (proxy); wikitext2: WikiText-2's test split
    ppl_window: int = 2048  # tokens per window (GPTQ/AWQ protocol)

    def __post_init__(self):
        require(self.ppl_source in ("local", "wikitext2"), "experiment.extra.ppl_source",
                f"must be local or wikitext2, got {self.ppl_source!r}")
        require(int(self.ppl_window) == self.ppl_window and self.ppl_window >= 2, "experiment.extra.ppl_window",
                f"must be an integer >= 2, got {self.ppl_window!r}")


@dataclass(frozen=True)
class AccuracySettings:
    max_length: int = 2048  # an engine scorer's context: requests are cut to it from the left
    bits: float = WEIGHT_BITS  # a baseline system's weight bits (its TTFT's)
    # EdgeFlow's runtime is checked against its fake-quant reference on the first N items (null: every item): a check
    # that the runtime computes what its reference does, not a verdict's statistic, and the float reference costs
    # about what the runtime does (EF 5 bits, lambada-local, 100 items: 90 s with every item checked, 52 s with 25).
    # 25 items are ~30 scored tokens on lambada-local, ~1500 on hellaswag-local
    agreement_items: int | None = 25
    # What scores a quantizer's model when no system is named: the fake-quant torch model, or our runtime's INT8
    # forward pass over the artifact wherever the runtime can run the method (2-3.5x faster per document here; checked
    # against the fake-quant model on agreement_items items), the fake-quant model elsewhere (said in every row)
    evaluator: str = "fake-quant"

    def __post_init__(self):
        _positive("max_length", self.max_length)
        _positive("agreement_items", self.agreement_items, allow_none=True)
        _bits(self.bits)
        require(self.evaluator in EVALUATORS, "experiment.extra.evaluator",
                f"must be one of {', '.join(EVALUATORS)}, got {self.evaluator!r}")


@dataclass(frozen=True)
class FidelitySettings:
    fidelity_windows: int = 8
    fidelity_window: int = 512  # tokens per window
    fidelity_text: str = "ppl-local"  # harness/data/streams.py fidelity_tokens: ppl-local | python-docs
    bits: float = WEIGHT_BITS  # a baseline system's weight bits (its TTFT's)

    def __post_init__(self):
        _positive("fidelity_windows", self.fidelity_windows)
        _positive("fidelity_window", self.fidelity_window)
        _bits(self.bits)


@dataclass(frozen=True)
class TtftSettings:
    """The ttft kind (experiments ttft, preload, completion, coldstart, pipeline)."""
    bits: float = WEIGHT_BITS  # weight bits handed to the system's prepare
    prompt_tokens: int | None = None  # None: the dataset's prompt set; N: corpus prompts of exactly N tokens
    n_prompts: int | None = None  # None: the dataset's count (1 for fixed lengths); N: the first N prompts
    gen_tokens: int = 1  # tokens generated per cold run, the first included
    ctx: int | None = None  # None: each request's context (harness/measure/workload.py); N: one size for all

    def __post_init__(self):
        _bits(self.bits)
        for key in ("prompt_tokens", "n_prompts", "ctx"):
            _positive(key, getattr(self, key), allow_none=True)
        _positive("gen_tokens", self.gen_tokens)
        require(self.gen_tokens <= 65536, "experiment.extra.gen_tokens", f"must be at most 65536, got {self.gen_tokens}")


@dataclass(frozen=True)
class PipelineSimSettings:
    prompt_tokens: int = 512
    threads: int = DEFAULT_THREADS
    warm_prefills: int = 3  # warm prefills profiled after the cold one (their median costs feed the simulator)

    def __post_init__(self):
        for key in ("prompt_tokens", "threads", "warm_prefills"):
            _positive(key, getattr(self, key))


@dataclass(frozen=True)
class NpuOracleSettings:
    oracle_layers: list[int] | None = None  # the decoder layers to compare; None = all

    def __post_init__(self):
        require(self.oracle_layers is None or all(int(i) == i and i >= 0 for i in self.oracle_layers),
                "experiment.extra.oracle_layers", f"must be null or a list of layer indices, got {self.oracle_layers!r}")


@dataclass(frozen=True)
class NpuProfileSettings:
    inferences: int = 3  # qnn-net-run --num_inferences: the execute time is their mean

    def __post_init__(self):
        _positive("inferences", self.inferences)


