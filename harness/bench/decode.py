"""`make bench-decode`: greedy decode speed of EdgeFlow against llama.cpp Q8_0 by context length, and the host's
memory-bandwidth limit.

    python -m harness.bench.decode [--reps 3] [--prompt-tokens 128,512,1024] [--new-tokens 128] [--threads 2]
                                   [--bits 5] [--model smollm2-135m | shape-qwen1.5-1.8b | ...]

Both engines get the same work at each context length (harness/measure/workload.py): the same corpus prompt ids, the
same context (prompt + new tokens), the same threads, one cold process each that prefills and then decodes
new_tokens - 1 greedy steps; repetitions interleaved over engines and context lengths (harness/measure/compare.py).
Decode speed is each engine's own clock over its decode steps (edgeflow-run's decode_s, llama.cpp's `eval time`),
the `decode_tokens_per_s` of the ttft rows.

Decode is memory-bound: each token reads every weight of the linears and the LM head once, and the keys and values
of every position before it. The limits printed beside the engines are the host's streaming-read bandwidth at the
same thread count (edgeflow-bench-stream over a buffer the size of those weights, measured in this run, between the
rounds) divided by the bytes one token reads: the INT8 weights alone, and the weights plus each engine's KV cache
at the mean position of its decode steps (ours float32, llama.cpp's default f16), which grows with the context.
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


KV_BYTES = {"edgeflow": 4, "llamacpp": 2}  # bytes per cached key or value: ours float32, llama.cpp's default f16


def kv_bytes_per_token(arch: dict, position: float, value_bytes: int) -> float:
    """Bytes of keys and values one decode step reads at `position`: every layer's K and V of the positions before."""
    head_dim = arch["hidden_size"] // arch["num_attention_heads"]
    kv_dim = arch.get("num_key_value_heads", arch["num_attention_heads"]) * head_dim
    return arch["num_hidden_layers"] * 2 * kv_dim * position * value_bytes


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(","))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--prompt-tokens", type=_ints, default=(128, 512, 1024), help="context lengths (comma-separated)")
    p.add_argument("--new-tokens", type=int, default=128)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--bits", type=int, default=5, help="EdgeFlow's bit budget (decode runs on INT8 either way)")
    p.add_argument("--model", default=DEFAULT_MODEL, help="a conf/model name; paper shapes have random weights")
    p.add_argument("--results", default=None)
    a = p.parse_args(argv)

    spec = load_model_spec(a.model)
    device = get_device({"name": "local"})
    systems = {"edgeflow": (get_system(SystemConfig(name="edgeflow", threads=a.threads)), a.bits),
               "llamacpp": (get_system(SystemConfig(name="llamacpp", threads=a.threads)), 8)}
    prepared = {name: s.prepare(spec, bits, device) for name, (s, bits) in systems.items()}
    works = {n: Workload.for_request(prompt_ids(spec, n), a.threads, new_tokens=a.new_tokens) for n in a.prompt_tokens}
    entries = {n: [Entry(f"{name} {'Q8_0' if name == 'llamacpp' else f'{bits}-bit'}", s, prepared[name], device)
                   for name, (s, bits) in systems.items()] for n in works}
    per_token = bytes_per_token(spec.architecture)
    bandwidth = []
    try:
        for r in range(a.reps):  # one interleaved round at a time over every context, the bandwidth between rounds
            for n, work in works.items():
                print(f"[bench-decode] round {r + 1}/{a.reps}: {n} prompt tokens", flush=True)
                run_interleaved(entries[n], work, 1, ProtocolConfig(busy_policy="flag"), warmup_rounds=0,
                                first_round=r)
            bandwidth.append(stream_read_gbps(a.threads, per_token / 1e6))
    finally:
        device.close()
    report(a, spec, works, entries, bandwidth, per_token)


def report(a, spec, works: dict, entries: dict, bandwidth: list[float], per_token: int) -> None:
    """Per context length: each engine's decode speed against llama.cpp's (paired by round) and the limits."""
    limit = [g * 1e9 / per_token for g in bandwidth]
    print(f"model: {spec.name}; {a.new_tokens} generated tokens ({a.new_tokens - 1} decode steps) after each prompt, "
          f"{a.threads} threads, {a.reps} interleaved rounds")
    print(f"bandwidth: streaming read {spread(bandwidth, '{:.2f}')} GB/s; weights alone (INT8 linears + LM head, "
          f"{per_token / 1e6:.1f} MB) = {spread(limit, '{:.1f}')} tokens/s")
    config = {"reps": a.reps, "prompt_tokens": list(a.prompt_tokens), "new_tokens": a.new_tokens,
              "threads": a.threads, "bits": a.bits, "model": a.model}
    recorder = BenchRecorder("decode", config, ResultsStore(a.results))
    for n, work in works.items():
        position = n + a.new_tokens / 2  # the mean position of the decode steps
        print(f"\n--- {n} prompt tokens (ctx {work.ctx}) ---")
        ref = next(e for e in entries[n] if e.system.name == "llamacpp")
        for e in entries[n]:
            tps, isa = e.values("decode_tokens_per_s"), e.measurements[0].engine.get("isa", "not reported")
            kv = kv_bytes_per_token(spec.architecture, position, KV_BYTES[e.system.name])
            bound = statistics.median(bandwidth) * 1e9 / (per_token + kv)
            line = (f"  {e.label}: decode {spread(tps, '{:.1f}')} tokens/s ({isa}); with its KV cache "
                    f"({kv / 1e6:.1f} MB at position {position:g}) the limit is {bound:.1f}: "
                    f"{statistics.median(tps) / bound:.0%} of it")
            if e is not ref:
                ratio = paired_ratios(tps, ref.values("decode_tokens_per_s"))
                line += f"; ratio to {ref.label}: {spread(ratio, '{:.2f}')}x"
            print(line)
            for rep, v in enumerate(tps):
                recorder.add("decode_tokens_per_s", v, "tokens/s", repetition=rep, system=e.system.name,
                             variant=e.label, prompt_tokens=work.n_prompt,
                             notes=f"{isa}; {a.new_tokens - 1} decode steps")
        for rep, v in enumerate(limit):
            # a bound computed from a measured bandwidth, not a decode anyone timed: labelled simulated
            recorder.add("decode_tokens_per_s", v, "tokens/s", repetition=rep, variant="bandwidth limit",
                         prompt_tokens=work.n_prompt, label="simulated",
                         notes=f"computed bound: streaming read {bandwidth[rep]:.2f} GB/s (measured) over "
                               f"{per_token / 1e6:.1f} MB per token (weights alone)")
    recorder.save()


if __name__ == "__main__":
    main()
