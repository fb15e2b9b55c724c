"""`make bench-decode`: greedy decode speed of EdgeFlow against llama.cpp Q8_0, and the host's memory-bandwidth limit.

    python -m harness.bench.decode [--reps 3] [--prompt-tokens 512] [--new-tokens 128] [--threads 2] [--bits 5]
                                   [--model smollm2-135m | shape-qwen1.5-1.8b | ...]

Both engines get the same work (harness/measure/workload.py): the same corpus prompt ids, the same context (prompt +
new tokens), the same threads, one cold process each that prefills and then decodes new_tokens - 1 greedy steps;
repetitions interleaved (harness/measure/compare.py). Decode speed is each engine's own clock over its decode steps
(edgeflow-run's decode_s, llama.cpp's `eval time`), the `decode_tokens_per_s` of the ttft rows.

Decode is memory-bound: each token reads every weight of the linears and the LM head once. The limit printed beside
the engines is the host's streaming-read bandwidth at the same thread count (edgeflow-bench-stream over a buffer the
size of those weights, measured in this run, between the rounds) divided by the bytes one token reads at INT8. The
KV cache's reads are left out, so the limit is optimistic with a long context: our float32 cache adds about 18% to
the default model's bytes per token at 512 tokens (24 MB against 134.5 MB).
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess

from harness.bench.record import BenchRecorder
from harness.bench.runtime import prompt_ids
from harness.devices import get_device
from harness.engine.build import engine_binary
from harness.measure.cold import ProtocolConfig
from harness.measure.compare import Entry, paired_ratios, run_interleaved, spread
from harness.measure.workload import Workload
from harness.models.zoo import DEFAULT_MODEL, load_model_spec
from harness.runner.store import ResultsStore
from harness.systems import SystemConfig, get_system


def bytes_per_token(arch: dict) -> int:
    """INT8 bytes of every linear layer's weights plus the LM head's: what one decode step reads."""
    h, i, layers, vocab = arch["hidden_size"], arch["intermediate_size"], arch["num_hidden_layers"], arch["vocab_size"]
    head_dim = h // arch["num_attention_heads"]
    kv = arch.get("num_key_value_heads", arch["num_attention_heads"]) * head_dim
    per_layer = h * h * 2 + h * kv * 2 + h * i * 3  # q, o; k, v; gate, up, down
    return layers * per_layer + vocab * h


def stream_read_gbps(threads: int, megabytes: float) -> float:
    exe = engine_binary("host", "edgeflow-bench-stream")
    out = subprocess.run([str(exe), str(threads), f"{megabytes:.1f}", "10"], capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout)["read_gbps"]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--prompt-tokens", type=int, default=512)
    p.add_argument("--new-tokens", type=int, default=128)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--bits", type=int, default=5, help="EdgeFlow's bit budget (decode runs on INT8 either way)")
    p.add_argument("--model", default=DEFAULT_MODEL, help="a conf/model name; paper shapes have random weights")
    p.add_argument("--results", default=None)
    a = p.parse_args(argv)

    spec = load_model_spec(a.model)
    ids = prompt_ids(spec, a.prompt_tokens)
    work = Workload.for_request(ids, a.threads, new_tokens=a.new_tokens)
    device = get_device({"name": "local"})
    systems = {"edgeflow": (get_system(SystemConfig(name="edgeflow", threads=a.threads)), a.bits),
               "llamacpp": (get_system(SystemConfig(name="llamacpp", threads=a.threads)), 8)}
    entries = [Entry(f"{name} {'Q8_0' if name == 'llamacpp' else f'{bits}-bit'}", s, s.prepare(spec, bits, device),
                     device) for name, (s, bits) in systems.items()]
    per_token = bytes_per_token(spec.architecture)
    bandwidth = []
    try:
        for _ in range(a.reps):  # one interleaved round at a time, the bandwidth measured between rounds
            run_interleaved(entries, work, 1, ProtocolConfig(busy_policy="flag"), warmup_rounds=0)
            bandwidth.append(stream_read_gbps(a.threads, per_token / 1e6))
    finally:
        device.close()

    limit = [g * 1e9 / per_token for g in bandwidth]
    print(f"model: {spec.name}; workload: {work.n_prompt} prompt tokens, {a.new_tokens} generated ({a.new_tokens - 1} decode steps), "
          f"ctx {work.ctx}, {a.threads} threads, {a.reps} interleaved rounds")
    print(f"bandwidth limit: streaming read {spread(bandwidth, '{:.2f}')} GB/s over {per_token / 1e6:.1f} MB "
          f"(INT8 linears + LM head) = {spread(limit, '{:.1f}')} tokens/s")
    ref = next(e for e in entries if e.system.name == "llamacpp")
    config = {"reps": a.reps, "prompt_tokens": a.prompt_tokens, "new_tokens": a.new_tokens, "threads": a.threads,
              "bits": a.bits, "model": a.model}
    recorder = BenchRecorder("decode", config, ResultsStore(a.results))
    for e in entries:
        tps = e.values("decode_tokens_per_s")
        isa = e.measurements[0].engine.get("isa", "not reported")
        line = f"  {e.label}: decode {spread(tps, '{:.1f}')} tokens/s ({isa})"
        line += f", {statistics.median(tps) / statistics.median(limit):.0%} of the bandwidth limit"
        if e is not ref:
            line += f"; ratio to {ref.label}: {spread(paired_ratios(tps, ref.values('decode_tokens_per_s')), '{:.2f}')}x"
        print(line)
        for rep, v in enumerate(tps):
            recorder.add("decode_tokens_per_s", v, "tokens/s", repetition=rep, system=e.system.name, variant=e.label,
                         prompt_tokens=work.n_prompt, notes=f"{isa}; {a.new_tokens - 1} decode steps")
    for rep, v in enumerate(limit):
        # a bound computed from a measured bandwidth, not a decode anyone timed: labelled simulated
        recorder.add("decode_tokens_per_s", v, "tokens/s", repetition=rep, variant="bandwidth limit",
                     prompt_tokens=work.n_prompt, label="simulated",
                     notes=f"computed bound: streaming read {bandwidth[rep]:.2f} GB/s (measured) over "
                           f"{per_token / 1e6:.1f} MB per token")
    recorder.save()


if __name__ == "__main__":
    main()
