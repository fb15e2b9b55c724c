"""Systems under test: one shape for every engine (llama.cpp, MNN, llm.npu, EdgeFlow). One module each, a registry.

Contract:
- `prepare(model, bits, device) -> Prepared`: build/convert/cache what the engine needs for this model and weight
  precision, put it on the device, and say which files a cold run must evict. Idempotent and cached.
- `run_cold(prepared, work, device, protocol) -> Measurement`: run `work` (harness/measure/workload.py: the token
  ids, the context size, the thread budget, the timed event, the cold state; the same object for every system of a
  comparison) cold under the shared protocol (harness/measure/cold.py): `protocol.repetitions` repetitions, each a
  fresh process with the model files evicted. The system hands work.ctx and work.threads to the engine's own flags,
  times work.timed_event, and returns the workload, the exact command line and what the engine reported of itself
  (`engine`: its ISA / kernel, its thread and context settings) in the Measurement.
  A Measurement holds, per repetition, metrics as (name, value, unit): at least `ttft_s` (wall clock from spawn to
  the first generated token: the primary metric), the engine's own timings as secondary metrics (prefixed with the
  engine's name), `peak_rss_mb`, `peak_pss_mb`, `energy_j` and `avg_power_w` over the cold start (None with a reason
  where the device has no counter), `temp_before_c` / `temp_peak_c`, `bytes_read_mb` where known, `load_avg_1m`, `flash_emulated_mbps`, and free-text notes.
- A system that can decode sets `decodes = True` and, when `work.new_tokens` > 1 (the ttft kind sets it from
  experiment.extra.gen_tokens), generates that many tokens greedily in the same cold process and adds
  `decode_metrics(...)`: `decode_s`, `decode_tokens_per_s`, `graph_switch_s` (Figure 15's completion breakdown).
- A system that cannot run on a device raises `NotRun(reason)` from prepare or run_cold; nothing else pretends to be it.
- An engine that crashes, hangs (system.timeout_s) or prints something unparseable raises EngineError (from
  harness.measure.cold) whose message ends with its stderr tail; the runner records a failed row and goes on.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from harness.engine.run import DEFAULT_THREADS
from harness.registry import Registry
from harness.measure.cold import ColdRun, EngineError, ProtocolConfig, summarize  # noqa: F401  (re-exported)
from harness.measure.workload import Workload


class NotRun(Exception):
    """This system cannot run here; str(e) is the reason, recorded in every row instead of a number."""


@dataclass(frozen=True)
class Timeline:
    """The samples behind a metric (e.g. the RSS behind a peak), stored as rows of their own: one `metric` row per
    sample, its time since the spawn in the `at_s` column."""

    metric: str  # e.g. "rss_mib"
    unit: str
    samples: tuple[tuple[float, float], ...]  # (seconds from spawn, value), thinned (thin)


@dataclass(frozen=True)
class Metric:
    name: str
    value: float | None
    unit: str
    reason: str | None = None  # why value is None
    detail: str | None = None  # words for the row's notes (what the value is); data goes in columns, never here
    timeline: Timeline | None = None  # the samples the value summarizes (peak RSS: the RSS over time)


@dataclass
class Prepared:
    """What prepare() made: files on the device to evict before each cold run, and how to run the engine."""

    system: str
    files: list[str]  # on the device
    artifacts: dict  # named paths (e.g. {"gguf": ..., "binary": ...})
    weight_format: str  # e.g. "gguf Q8_0", "mnn int8 per-channel"
    notes: list[str] = field(default_factory=list)
    # typed columns of every row these weights give (harness/runner/store.py): e.g. {"accelerator": CPU_THREADS,
    # "numerics": "npu"} for our runtime
    columns: dict = field(default_factory=dict)


CPU_THREADS = "cpu threads"  # the `accelerator` column of an engine whose accelerator half runs on CPU threads


@dataclass
class Measurement:
    system: str
    repetitions: list[list[Metric]]  # one list of metrics per measured repetition
    notes: list[str] = field(default_factory=list)
    workload: Workload | None = None  # the work every repetition did (recorded in each row)
    command: list[str] = field(default_factory=list)  # the exact command line run (temporary files named as run)
    engine: dict = field(default_factory=dict)  # what the engine reported of itself: isa, threads, ctx, ...

    def values(self, name: str) -> list[float]:
        return [m.value for rep in self.repetitions for m in rep if m.name == name and m.value is not None]

    def summary(self, name: str = "ttft_s") -> dict:
        """Median and spread over repetitions of one metric."""
        vals = self.values(name)
        if not vals:
            raise KeyError(f"no values of metric {name!r} in this measurement")
        return summarize(vals)


@dataclass
class SystemConfig:
    """The keys of conf/system/*.yaml every system has; a system with more keys declares its own subclass as its
    `config_type` (LlamaCppConfig, MNNConfig, LlmNpuConfig), and a key no system of that name takes is an error."""

    name: str = "llamacpp"
    threads: int = DEFAULT_THREADS
    timeout_s: float = 300.0

    def __post_init__(self):
        if self.name not in SYSTEMS:  # (the registry imports harness.systems.<name> when it exists)
            SYSTEMS.load_all("system")  # so that the message lists every system
            raise ValueError(f"system.name must be one of {sorted(SYSTEMS)}, got {self.name!r}")
        if not (1 <= int(self.threads) <= 256):
            raise ValueError(f"system.threads must be an integer in [1, 256], got {self.threads}")
        if not (0 < float(self.timeout_s) <= 86400):
            raise ValueError(f"system.timeout_s must be within (0, 86400] s, got {self.timeout_s}")


# Where a cold start's time goes (Figure 1), in the order it passes; each system maps its own clocks onto these.
TTFT_PHASES = ("process start", "setup", "load", "weight preparation", "prefill", "bubble")


class System(ABC):
    """A system under test; see the module docstring for the contract."""

    name: str = ""
    display: str = ""  # its name in every table and figure ("llama.cpp")
    short: str = ""  # in dense figure labels, where the paper abbreviates it (Figure 10's "EF 5b"); else display
    color: str = ""  # its colour in every figure (matplotlib)
    config_type: type[SystemConfig] = SystemConfig  # its conf/system/<name>.yaml keys
    decodes: bool = False  # run_cold honours work.new_tokens > 1 (greedy decode after the first token)
    # What the paper's figures need of a system (experiments/lineup.py reads these; no figure names a system):
    own_quantizer: str | None = None  # the conf/quantizer option it sweeps bit budgets with (EdgeFlow's: the
    # paper's proposed system, drawn at every budget and compared against the others); None: it brings its own format
    own_packing: str | None = None  # the conf/packing option of its own artifact (with own_quantizer)
    own_pipeline: str | None = None  # its default pipeline policy: rows timed under another are ablations'
    stand_in: str | None = None  # conf/quantizer option whose fake-quant model is drawn beside it as a stand-in for
    # its weight format's accuracy (Figure 10), never under its name
    paper_series: str | None = None  # the `system` its numbers are compared with in results/paper/*.csv
    startup_metric: str | None = None  # a start-up the harness adds that the engine has not on a phone (MNN's
    # Python interpreter import): Figure 10 also shows its TTFT without it

    def __init__(self, cfg: SystemConfig):
        self.cfg = cfg

    @classmethod
    def ttft_phases(cls, m: dict[str, float]) -> dict[str, float] | None:
        """The TTFT_PHASES (seconds) of one cold start from its row's metrics {metric: value} (ttft_s and this
        engine's own clocks), or None when they are missing. Phases a system cannot see are absent."""
        return None

    @classmethod
    def budget_overrides(cls, bits: float | None) -> list[str]:
        """The Hydra overrides that give this system an artifact of `bits` average weight bits: its own quantizer
        and packing; [] for an engine that brings its own format (bits None)."""
        if cls.own_quantizer is None or bits is None:
            return []
        return [f"quantizer={cls.own_quantizer}", f"quantizer.budget_bits={float(bits)}",
                *([f"packing={cls.own_packing}"] if cls.own_packing else [])]

    def configure(self, cfg) -> None:
        """Read other config groups of the job (EdgeFlow takes `quantizer` and `packing`); baselines need none."""

    def weight_bits(self, requested: float) -> float:
        """The weight bits `prepare` gets for experiment.extra.bits = `requested`: the baselines' INT8 formats take
        whole bits; a system whose quantizer sets its own budget (EdgeFlow) overrides this."""
        return int(requested)

    @abstractmethod
    def prepare(self, model, bits: float, device) -> Prepared: ...

    @abstractmethod
    def run_cold(self, prepared: Prepared, work: Workload, device, protocol: ProtocolConfig) -> Measurement: ...

    def open_scorer(self, prepared: Prepared, ctx: int):
        """This engine's own forward pass over `prepared` (the weights its TTFT loads), for accuracy and fidelity: a
        context manager with logprobs(ids, last) -> float32 [last, V] and logits(ids) -> [T, V] (every position's
        logits or log-probabilities: fidelity normalises them), over requests of up to `ctx` tokens, with
        system.threads threads. NotRun (with the reason) where the engine cannot score here."""
        raise NotRun(f"{self.name} has no scorer: its own forward pass cannot score token sequences here")

    def reference_model(self, prepared: Prepared, fp_model):
        """The torch model that computes what this engine's scorer should over `prepared` (EdgeFlow: the fake-quant
        model of its artifact), so its accuracy runs can say how close the engine came (agreement rows); None where
        there is none (a baseline's own format)."""
        return None

    def check_workload(self, work: Workload) -> None:
        """Refuse work this system cannot do as asked (a ValueError naming the setting), before any run."""
        if work.timed_event != "first_token":
            raise ValueError(f"{self.name}: times the first generated token only, not {work.timed_event!r}")
        if work.threads != self.cfg.threads:
            raise ValueError(f"{self.name}: the workload's thread budget ({work.threads}) is not system.threads "
                             f"({self.cfg.threads}); build the workload from the system's config")


def cold_metrics(run: ColdRun, device) -> list[Metric]:
    """The protocol's metrics of one repetition, the same for every system."""
    def mb(v):
        return None if v is None else v / 1e6
    energy_reason = None if run.energy_j is not None else run.energy_reason
    pss_kb = max((p for _, p in run.pss_timeline), default=None)
    preload = [] if run.preloaded_bytes is None else [Metric("preloaded_mb", run.preloaded_bytes / 1e6, "MB")]
    return preload + [
        Metric("ttft_s", run.ttft_s, "s"),
        Metric("exit_s", run.exit_s, "s"),
        Metric("peak_rss_mb", None if run.peak_rss_kb is None else run.peak_rss_kb / 1024, "MiB",
               None if run.peak_rss_kb is not None else "no RSS sample",
               timeline=Timeline("rss_mib", "MiB", thin([(t, kb / 1024) for t, kb in run.rss_timeline]))),
        Metric("bytes_read_mb", mb(run.bytes_read), "MB", None if run.bytes_read is not None else "not known on this device"),
        Metric("peak_pss_mb", None if pss_kb is None else pss_kb / 1024, "MiB",
               None if run.pss_timeline else "PSS is sampled only by an on-device sampler",
               timeline=Timeline("pss_mib", "MiB", thin([(t, p / 1024) for t, p in run.pss_timeline]))),
        Metric("energy_j", run.energy_j, "J", energy_reason,
               timeline=Timeline("power_w", "W", thin(run.power_timeline))),
        Metric("avg_power_w", run.avg_power_w, "W", energy_reason if run.avg_power_w is None else None),
        Metric("temp_before_c", run.temp_before_c, "C", run.thermal_reason),
        Metric("temp_peak_c", run.temp_peak_c, "C", None if run.temp_peak_c is not None else
               "temperature is sampled during the run only by an on-device sampler"),
        Metric("resident_before", run.resident_before, "fraction"),
        Metric("load_avg_1m", run.load_avg, "load"),
        Metric("cpu_busy_before", run.cpu_busy, "fraction",
               None if run.cpu_busy is not None else "not sampled before the run (protocol.busy_signal)"),
        Metric("cpu_busy_during", run.cpu_busy_during, "fraction",
               None if run.cpu_busy_during is not None else "not measured during the run (protocol.busy_signal, or "
                                                            "a device that cannot attribute CPU time to a run)"),
        Metric("host_busy", float(run.host_busy), "bool"),
        Metric("flash_emulated_mbps", device.flash_read_mbps, "MB/s",
               None if device.flash_read_mbps is not None else "native storage speed"),
    ]


def decode_metrics(decode_s: float, steps: int, switch_s: float | None, switch_note: str) -> list[Metric]:
    """Figure 15's completion breakdown beyond the cold start: `steps` greedy decode steps after the first token took
    `decode_s`; `switch_s` is the time between the end of prefill and the first decode step (None where the engine
    has no such transition; `switch_note` says what the value is or why there is none)."""
    return [Metric("gen_tokens", steps + 1, "tokens"),
            Metric("decode_s", decode_s, "s", detail=f"{steps} decode steps after the first token"),
            Metric("decode_tokens_per_s", steps / decode_s if decode_s > 0 else None, "tokens/s",
                   None if decode_s > 0 else "no decode time"),
            Metric("graph_switch_s", switch_s, "s", switch_note if switch_s is None else None,
                   switch_note if switch_s is not None else None)]


def thin(samples, points: int = 40) -> tuple[tuple[float, float], ...]:
    """A (seconds, value) series thinned to about `points` samples, the last one kept."""
    samples = list(samples)
    step = max(1, len(samples) // points)
    thinned = samples[::step] + (samples[-1:] if samples and (len(samples) - 1) % step else [])
    return tuple((round(t, 3), round(v, 2)) for t, v in thinned)


SYSTEMS = Registry("system", SystemConfig, package="harness.systems")  # conf/system/<name>.yaml: systems/<name>.py
register_system = SYSTEMS.register


def registered() -> dict[str, type[System]]:
    """Every system of conf/system/*.yaml, {name: class}: the others by name, then the one that sweeps budgets with
    its own quantizer (the paper's system, EdgeFlow), so the baselines come first in every figure and list."""
    SYSTEMS.load_all("system")
    return dict(sorted(SYSTEMS.items(), key=lambda kv: (kv[1].own_quantizer is not None, kv[0])))


def baselines() -> list[str]:
    """The systems that bring their own weight format (no own_quantizer): what `make baselines` prepares."""
    return [name for name, cls in registered().items() if cls.own_quantizer is None]


def get_system(cfg) -> System:
    """A system from a SystemConfig or a mapping with its keys (e.g. a Hydra node); errors name the bad key."""
    return SYSTEMS.create(cfg)
