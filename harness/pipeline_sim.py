"""A discrete-event simulator of the runtime's prefill pipeline (edgeflow_runtime/src/engine/pipeline.cpp and
executor.cpp): the same task graph, placements, priorities and steal rule, replayed over an operator cost table, so
that scheduling policies can be compared at a phone's NPU/CPU speed ratios on any host.

What it mirrors (change both sides together):
- graph: per chunk c, embed(c); per layer l and chunk c the stages attn_in, qkv, attention, o_proj, ffn_in, gate_up,
  swiglu, down in a chain (attn_in(l, c) after down(l-1, c)); attention(l, c) after attention(l, c-1);
  llmnpu-static also attn_in(l, c) after down(l, c-2); head of the last chunk after down(L-1, c).
  Tasks are created in the runtime's order (embeds, then layer-major, chunk-minor, stage order), which is the
  order roots are queued and successors are released in.
- placement (stage_lane) and priority (stage_priority), lower first, ties by queueing order.
- workers: threads == 1 -> one worker takes the lower head of the two queues; otherwise a CPU dispatcher and an
  accelerator dispatcher. The CPU dispatcher, with its own queue empty and policy place+priority+steal, takes the
  accelerator queue's head when that queue holds more than steal_threshold tasks. Helper threads (threads > 2) and
  lane help are data parallelism inside a task: their effect is in the measured costs, not simulated.
- at one instant, completions are processed first (in completion order), then idle workers pick, CPU first.

Costs: `CostTable` maps (stage, lane it runs on) to seconds per chunk of `chunk` tokens, and optionally (stage, lane,
chunk index) where measured. Build one from the runtime's `edgeflow-run --profile-ops FILE` (medians) and optionally
rescale it to a phone's ratios (`phone_like`, SIM_INPUTS): non-matmul operators 2.1x slower on the NPU than on the CPU
(the paper's Figure 5b), INT8 matmuls `matmul_speedup`x faster on the NPU than on the CPU (assumed: 5, inferred from
the paper's steal threshold; the paper gives no such ratio).

    python -m harness.pipeline_sim PROFILE.json [--tokens 512] [--warm] [--phone-like] [--threads 2]
"""
from __future__ import annotations

import argparse
import heapq
import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from harness.engine.run import DEFAULT_CHUNK, DEFAULT_STEAL_THRESHOLD, DEFAULT_THREADS, POLICIES

LAYER_STAGES = ("attn_in", "qkv", "attention", "o_proj", "ffn_in", "gate_up", "swiglu", "down")
MATMULS = {"qkv", "o_proj", "gate_up", "down"}
STAGES = ("embed", *LAYER_STAGES, "head")
NPU_SLOWDOWN_NON_MATMUL = 2.1  # Figure 5b: RMSNorm, SwiGLU, quantize on the NPU vs the CPU
NPU_MATMUL_SPEEDUP = 5.0       # assumed: the paper states no such ratio (see SIM_INPUTS)


@dataclass(frozen=True)
class SimInput:
    """One input of the phone-like simulation, with where its value comes from: a reader sees it beside any verdict
    the simulation feeds."""

    what: str
    value: float
    source: str


SIM_INPUTS = (
    SimInput("non-matmul operators (RMSNorm, SwiGLU, quantize): NPU time / CPU time", NPU_SLOWDOWN_NON_MATMUL,
             "the paper's Figure 5b (measured by its authors on a Snapdragon 8 Elite)"),
    SimInput("INT8 matmuls: CPU time / NPU time", NPU_MATMUL_SPEEDUP,
             "assumed: inferred from the steal threshold 5 of section 4.3 (a task is stolen when the NPU's queue holds "
             "more than 5 tasks); the paper states no such ratio"),
)


def sim_inputs_text() -> str:
    """The simulation's inputs in one line, for rows' notes: 'non-matmul ... 2.1x (the paper's Figure 5b); ...'."""
    return "; ".join(f"{i.what} {i.value:g}x ({i.source.split(':')[0].split(' (')[0]})" for i in SIM_INPUTS)


def stage_lane(policy: str, stage: str) -> str:
    """pipeline.cpp stage_lane: matmuls on the accelerator; llm.npu also its norms, quantize and SwiGLU."""
    if stage in MATMULS:
        return "accel"
    if policy == "llmnpu-static" and stage in ("attn_in", "ffn_in", "swiglu"):
        return "accel"
    return "cpu"


def stage_priority(policy: str, layer: int, chunk: int, stage_index: int, n_layers: int, n_chunks: int) -> int:
    """pipeline.cpp stage_priority, lower first: topological (layer, then stage, then chunk: the execution graph's
    order) or position-guided (chunk, then layer, then stage)."""
    if policy in ("llmnpu-static", "place"):
        return ((layer + 1) * 16 + stage_index) * n_chunks + chunk
    return (chunk * (n_layers + 2) + (layer + 1)) * 16 + stage_index


@dataclass
class Task:
    stage: str
    layer: int
    chunk: int
    lane: str
    priority: int
    index: int  # creation order
    next: list[int] = field(default_factory=list)
    waiting: int = 0


def build_graph(policy: str, n_layers: int, n_tokens: int, chunk: int, all_logits: bool = False) -> list[Task]:
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {list(POLICIES)}, got {policy!r}")
    if n_layers < 1 or n_tokens < 1 or chunk < 1:
        raise ValueError("n_layers, n_tokens and chunk must be positive")
    n_chunks = (n_tokens + chunk - 1) // chunk
    tasks: list[Task] = []

    def add(stage, layer, c, k):
        t = Task(stage, layer, c, stage_lane(policy, stage), stage_priority(policy, layer, c, k, n_layers, n_chunks),
                 len(tasks))
        tasks.append(t)
        return t

    def depend(before: Task | None, after: Task):
        if before is not None:
            before.next.append(after.index)
            after.waiting += 1

    last = [add("embed", -1, c, 0) for c in range(n_chunks)]
    for layer in range(n_layers):
        prev_attn: Task | None = None
        done: list[Task] = []
        for c in range(n_chunks):
            for k, stage in enumerate(LAYER_STAGES):
                t = add(stage, layer, c, k)
                depend(last[c], t)
                last[c] = t
                if stage == "attn_in" and policy == "llmnpu-static" and c >= 2:
                    depend(done[c - 2], t)
                if stage == "attention":
                    depend(prev_attn, t)
                    prev_attn = t
            done.append(last[c])
    for c in range(n_chunks):
        if all_logits or c == n_chunks - 1:
            depend(last[c], add("head", n_layers, c, 0))
    return tasks


@dataclass
class CostTable:
    """Seconds of one task of `chunk` tokens per (stage, lane it runs on)."""

    chunk: int
    seconds: dict[tuple[str, str], float]
    # Optional finer costs per (stage, lane, chunk index): attention grows with the chunk's position in the prompt.
    per_chunk: dict[tuple[str, str, int], float] = field(default_factory=dict)

    def cost(self, stage: str, lane: str, tokens: int, chunk_index: int | None = None) -> float:
        if chunk_index is not None and (stage, lane, chunk_index) in self.per_chunk:
            return self.per_chunk[(stage, lane, chunk_index)] * tokens / self.chunk
        key = (stage, lane)
        if key not in self.seconds:
            other = "cpu" if lane == "accel" else "accel"
            if (stage, other) not in self.seconds:
                raise KeyError(f"no cost for stage {stage!r} on either lane")
            # Never measured on this lane: the same time as on the other (the host emulator runs both on CPU cores).
            key = (stage, other)
        return self.seconds[key] * tokens / self.chunk

    @classmethod
    def from_profile(cls, profile: dict, prefill: int | None = None, warm: bool = False) -> "CostTable":
        """Median per (stage, lane) of an `edgeflow-run --profile-ops` file: of one prefill (0 is the cold one), of
        the warm ones (`--repeat-prefill N`: weights in memory, no I/O or unpacking competing for the cores), or
        of all."""
        groups: dict[tuple[str, str], list[float]] = {}
        fine: dict[tuple[str, str, int], list[float]] = {}
        for t in profile["tasks"]:
            if (prefill is not None and t.get("prefill") != prefill) or (warm and t.get("prefill", 0) == 0):
                continue
            # A stolen accelerator task ran on a CPU thread: it is a CPU-lane cost of that stage.
            lane = "cpu" if t["stolen"] else t["lane"]
            groups.setdefault((t["stage"], lane), []).append(t["t1"] - t["t0"])
            fine.setdefault((t["stage"], lane, t["chunk"]), []).append(t["t1"] - t["t0"])
        if not groups:
            raise ValueError("the profile holds no compute tasks (for that prefill; warm ones need --repeat-prefill)")
        med = statistics.median
        return cls(int(profile.get("chunk", DEFAULT_CHUNK)), {k: med(v) for k, v in groups.items()},
                   {k: med(v) for k, v in fine.items()})

    def phone_like(self, npu_slowdown: float = NPU_SLOWDOWN_NON_MATMUL,
                   matmul_speedup: float = NPU_MATMUL_SPEEDUP) -> "CostTable":
        """The host's CPU costs as the CPU's, and the accelerator's at SIM_INPUTS' ratios to them."""
        def scale(stage: str, cpu: float) -> float:
            return cpu / matmul_speedup if stage in MATMULS else cpu * npu_slowdown

        out, fine = {}, {}
        for stage in STAGES:
            cpu = self.seconds.get((stage, "cpu"), self.seconds.get((stage, "accel")))
            if cpu is None:
                continue
            out[(stage, "cpu")], out[(stage, "accel")] = cpu, scale(stage, cpu)
        for (stage, lane, c) in self.per_chunk:
            cpu = self.per_chunk.get((stage, "cpu", c), self.per_chunk.get((stage, "accel", c)))
            fine[(stage, "cpu", c)], fine[(stage, "accel", c)] = cpu, scale(stage, cpu)
        return CostTable(self.chunk, out, fine)

    def layers_only(self) -> "CostTable":
        """These costs with the embedding lookup and the LM head free: the decoder layers' pipeline alone (the paper's
        Figure 14 times one layer)."""
        def free(key):
            return key[0] in ("embed", "head")
        return CostTable(self.chunk, {k: 0.0 if free(k) else v for k, v in self.seconds.items()},
                         {k: 0.0 if free(k) else v for k, v in self.per_chunk.items()})


@dataclass
class Run:
    """start/end per task in start order; per-worker busy time; makespan."""

    order: list[tuple[str, int, int]]  # (stage, layer, chunk) in start order
    spans: list[tuple[Task, str, float, float, bool]]  # task, worker, start, end, stolen
    makespan: float
    busy: dict[str, float]

    def bubble_rate(self, worker: str) -> float:
        return 1.0 - self.busy[worker] / self.makespan if self.makespan > 0 else 0.0

    def summary(self) -> dict:
        return {"makespan_s": self.makespan, "stolen": sum(s[4] for s in self.spans),
                **{f"{w}_bubble_rate": round(self.bubble_rate(w), 4) for w in self.busy},
                **{f"{w}_busy_s": b for w, b in self.busy.items()}}


def simulate(policy: str, costs: CostTable, *, n_layers: int, n_tokens: int, chunk: int,
             threads: int = DEFAULT_THREADS, steal_threshold: int = DEFAULT_STEAL_THRESHOLD, all_logits: bool = False) -> Run:
    tasks = build_graph(policy, n_layers, n_tokens, chunk, all_logits)
    if threads < 1 or steal_threshold < 0:
        raise ValueError("threads must be >= 1 and steal_threshold >= 0")
    workers = ["both-0"] if threads == 1 else ["cpu-0", "accel-0"]
    steal = policy == POLICIES[-1]
    queues: dict[str, list] = {"cpu": [], "accel": []}
    seq = 0

    def push(t: Task):
        nonlocal seq
        heapq.heappush(queues[t.lane], (t.priority, seq, t.index))
        seq += 1

    for t in tasks:  # roots, in creation order, all queued before any starts
        if t.waiting == 0:
            push(t)
    running: list[tuple[float, int, int, str]] = []  # (end, start order, task, worker)
    busy = {w: 0.0 for w in workers}
    spans, order = [], []
    now, done = 0.0, 0
    idle = set(workers)

    def pick(w: str):
        cq, aq = queues["cpu"], queues["accel"]
        if w == "both-0":
            if cq and aq:
                q = cq if cq[0][:2] < aq[0][:2] else aq
            else:
                q = cq or aq
            return (heapq.heappop(q)[2], False) if q else None
        if w == "cpu-0":
            if cq:
                return heapq.heappop(cq)[2], False
            if steal and len(aq) > steal_threshold:
                return heapq.heappop(aq)[2], True
            return None
        return (heapq.heappop(aq)[2], False) if aq else None

    n_started = 0
    while done < len(tasks):
        for w in workers:  # idle workers pick, CPU first
            if w in idle:
                got = pick(w)
                if got is None:
                    continue
                i, stolen = got
                t = tasks[i]
                run_lane = "cpu" if (stolen or w == "cpu-0" or (w == "both-0" and t.lane == "cpu")) else "accel"
                d = costs.cost(t.stage, run_lane, min(chunk, n_tokens - t.chunk * chunk), t.chunk)
                heapq.heappush(running, (now + d, n_started, i, w))
                spans.append((t, w, now, now + d, stolen))
                order.append((t.stage, t.layer, t.chunk))
                busy[w] += d
                idle.discard(w)
                n_started += 1
        if not running:
            raise RuntimeError("simulation stalled: tasks left but none ready (a cycle in the graph?)")
        end, _, i, w = heapq.heappop(running)
        now = end
        finished = [(i, w)]
        while running and running[0][0] == now:  # simultaneous completions, in start order
            _, _, j, v = heapq.heappop(running)
            finished.append((j, v))
        for j, v in finished:
            done += 1
            idle.add(v)
            for n in tasks[j].next:
                tasks[n].waiting -= 1
                if tasks[n].waiting == 0:
                    push(tasks[n])
    return Run(order, spans, now, busy)


def profile_order(profile: dict, prefill: int) -> list[tuple[str, int, int]]:
    """The runtime's task order (by start time) of one prefill in a --profile-ops file."""
    tasks = sorted((t for t in profile["tasks"] if t["prefill"] == prefill), key=lambda t: t["t0"])
    return [(t["stage"], t["layer"], t["chunk"]) for t in tasks]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("profile", type=Path, help="edgeflow-run --profile-ops output")
    ap.add_argument("--prefill", type=int, default=None, help="costs of one prefill only (0 cold; default all)")
    ap.add_argument("--warm", action="store_true", help="costs of the warm prefills only (--repeat-prefill N)")
    ap.add_argument("--tokens", type=int, default=512)
    ap.add_argument("--threads", type=int, default=DEFAULT_THREADS)
    ap.add_argument("--steal-threshold", type=int, default=DEFAULT_STEAL_THRESHOLD)
    ap.add_argument("--phone-like", action="store_true", help="rescale to a phone's NPU/CPU ratios (the paper's 2.1x, an assumed 5x)")
    a = ap.parse_args(argv)
    profile = json.loads(a.profile.read_text())
    costs = CostTable.from_profile(profile, a.prefill, warm=a.warm)
    if a.phone_like:
        costs = costs.phone_like()
    for policy in POLICIES:
        run = simulate(policy, costs, n_layers=profile["n_layers"], n_tokens=a.tokens, chunk=costs.chunk,
                       threads=a.threads, steal_threshold=a.steal_threshold)
        print(policy, json.dumps(run.summary()))


if __name__ == "__main__":
    main()
