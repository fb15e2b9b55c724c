"""edgeflow-run on packed files of a tiny random Llama: results agree with the in-process engine and the fake-quant
reference, the JSON report and the trace are complete, and every kind of bad input exits with its documented code
and a message (never a crash). EDGEFLOW_RUN_BINARY runs the same tests against another build (make test-sanitize)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess

import numpy as np
import pytest
import torch

from harness.pack import PackedFile, pack_artifact
from harness.engine.build import engine_binary
from harness.engine.capi import NativeEngine
from harness.engine.run import RuntimeRunError, run_edgeflow
from tests.runtime.conftest import make_artifact, tiny_llama

pytestmark = pytest.mark.native

PROMPT = [3, 17, 99, 4, 250, 8, 8, 1, 42, 77, 5]


@pytest.fixture(scope="module")
def binary():
    if os.environ.get("EDGEFLOW_RUN_BINARY"):
        return os.environ["EDGEFLOW_RUN_BINARY"]
    return str(engine_binary("host"))


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    model = tiny_llama(seed=5, tie=False)
    artifact = make_artifact(model, seed=6)
    path = pack_artifact(artifact, tmp_path_factory.mktemp("packed") / "tiny.efpk", layout="weightlet")
    return model, artifact, path


def run(binary, *args, stdin="1 2 3"):
    return subprocess.run([binary, *map(str, args)], input=stdin, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("layout", ["weightlet", "int8", "mixed48", "kquant"])
def test_packed_file_scores_like_the_artifact(packed, tmp_path, layout):
    model, artifact, _ = packed
    path = pack_artifact(artifact, tmp_path / f"{layout}.efpk", layout=layout)
    with NativeEngine.from_artifact(artifact) as mem, NativeEngine.open(path, chunk=4) as disk:
        want = mem.logits(PROMPT)
        got = disk.logits(PROMPT)
    assert torch.equal(got, want)  # unpacking restores the artifact's codes exactly


@pytest.mark.parametrize("layout", ["weightlet", "int8", "kquant"])
@pytest.mark.parametrize("tie", [False, True])
def test_an_lm_head_in_the_bit_budget_is_packed_and_scores_like_the_artifact(tmp_path, layout, tie):
    """Rows of 3..8 bits (a tied model's head copied, as quantizer.lm_head=budget makes): `lm_head.weight` in the
    layout (format version 4), unpacked by the loader into the LM head table."""
    model = tiny_llama(seed=7, tie=tie)
    artifact = make_artifact(model, seed=8, head_in_budget=True)
    path = pack_artifact(artifact, tmp_path / f"{layout}.efpk", layout=layout)
    f = PackedFile(path)
    assert f.version == 4 and not f.config["tie_word_embeddings"] and "lm_head.codes" not in {t.name for t in f.tensors}
    codes, bits = f.quant_codes("lm_head")
    np.testing.assert_array_equal(codes, artifact.others["lm_head.codes"].numpy())
    if layout != "int8":
        np.testing.assert_array_equal(bits, artifact.others["lm_head.bits"].numpy())
    with NativeEngine.from_artifact(artifact) as mem, NativeEngine.open(path, chunk=4) as disk:
        assert torch.equal(disk.logits(PROMPT), mem.logits(PROMPT))


def test_a_head_packed_in_the_budget_of_a_model_that_says_tied_is_refused(tmp_path):
    """The config's tied flag set (metadata resealed) beside an LM head of its own: an error naming the head."""
    import struct

    from harness.engine.capi import NativeError
    from harness.pack.fuzz_corpus import reseal_meta

    path = pack_artifact(make_artifact(tiny_llama(seed=7, tie=False), seed=8, head_in_budget=True), tmp_path / "m.efpk")
    data = bytearray(path.read_bytes())
    reseal_meta(data, lambda meta: struct.pack_into("<I", meta, 40, 1))  # config block, flags: bit 0 = tied
    path.write_bytes(bytes(data))
    with pytest.raises(NativeError, match="lm_head.*the model has tied embeddings"):
        with NativeEngine.open(path) as engine:
            engine.logits(PROMPT)


def test_the_final_region_is_read_before_the_last_layers_that_outweigh_it(tmp_path, binary):
    """A head packed in the budget is unpacked while the last layers are read, not after the last byte: the I/O lane
    reads the final region (trace: load of layer L) before the last layers holding at least its bytes."""
    model = tiny_llama(seed=9, tie=False, layers=6)
    path = pack_artifact(make_artifact(model, seed=10, head_in_budget=True), tmp_path / "m.efpk")
    f = PackedFile(path)
    sizes = [r.size for r in f.regions]  # embedding, layers 0..5, final
    trace = tmp_path / "trace.json"
    run_edgeflow(path, PROMPT, threads=2, chunk=4, trace=trace, binary=binary)
    loads = sorted((e["ts"], e["args"]["layer"]) for e in json.loads(trace.read_text())["traceEvents"]
                   if e.get("ph") == "X" and e["name"] == "load")
    order = [layer + 1 for _, layer in loads]  # units: 0 embedding, 1 + l layer l, 7 final
    after = order[order.index(7) + 1:]
    assert sorted(order) == list(range(8)) and after and after == list(range(7 - len(after), 7))
    assert sum(sizes[u] for u in after) >= sizes[7] > sum(sizes[u] for u in after[1:])


def test_first_token_and_report(packed, binary, tmp_path):
    model, artifact, path = packed
    trace = tmp_path / "trace.json"
    rep = run_edgeflow(path, PROMPT, threads=2, chunk=4, new_tokens=3, evict_cache=True, trace=trace, binary=binary)
    from harness.quant.fakequant import build_fakequant_model
    ids = torch.tensor(PROMPT)
    with torch.no_grad():
        ref_logits = build_fakequant_model(artifact, model)(ids[None]).logits[0]
    assert rep.tokens[0] == int(ref_logits[-1].argmax())
    assert len(rep.tokens) == 4
    parts = rep.breakdown_s
    assert set(parts) == {"setup", "io", "unpack", "compute", "idle"}
    assert sum(parts.values()) == pytest.approx(rep.ttft_s, rel=0.02, abs=2e-3)
    assert rep.bytes_read > 0 and rep.peak_rss_bytes > 0
    events = json.loads(trace.read_text())["traceEvents"]
    names = {e["name"] for e in events if e["ph"] == "X"}
    assert {"load", "unpack", "embed", "attn_in", "qkv", "attention", "o_proj", "ffn_in", "gate_up", "swiglu",
            "down", "head"} <= names
    # greedy decode continues as a longer prompt would be scored
    with NativeEngine.open(path) as eng:
        seq = PROMPT + rep.tokens[:3]
        assert eng.logits(seq).argmax(-1)[len(PROMPT) - 1:].tolist() == rep.tokens


@pytest.mark.parametrize("threads", [1, 2])
def test_greedy_decode_gives_the_fake_quant_references_tokens(packed, binary, threads):
    """The decode path (its own pool, decode attention kernel, LM head kernel) against the fake-quant reference's
    greedy continuation, token for token, with its speed reported."""
    from harness.quant.fakequant import build_fakequant_model

    model, artifact, path = packed
    rep = run_edgeflow(path, PROMPT, threads=threads, chunk=4, new_tokens=8, binary=binary)  # the first + 8 more
    reference, seq = build_fakequant_model(artifact, model), list(PROMPT)
    with torch.no_grad():
        for _ in range(9):
            seq.append(int(reference(torch.tensor(seq)[None]).logits[0, -1].argmax()))
    assert rep.tokens == seq[len(PROMPT):]
    assert rep.raw["decode_tokens_per_s"] > 0


def test_every_thread_that_computes_is_in_the_budget(packed, binary, tmp_path):
    """Unpacking runs on the compute threads (no unpack thread); the only other thread is the reader, whose CPU time
    is reported."""
    _, _, path = packed
    trace = tmp_path / "trace.json"
    rep = run_edgeflow(path, PROMPT, threads=2, chunk=4, evict_cache=True, trace=trace, binary=binary).raw
    assert rep["unpack_threads"] == 0 and rep["io_threads"] == 1 and 0 <= rep["io_cpu_s"] < rep["ttft_s"]
    events = json.loads(trace.read_text())["traceEvents"]
    tracks = {e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
    unpack_tids = {e["tid"] for e in events if e.get("ph") == "X" and e["name"] == "unpack"}
    names = {e["tid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
    assert tracks == {"io-0", "cpu-0", "accel-0"}, tracks
    assert {names[t] for t in unpack_tids} <= {"cpu-0", "accel-0"}


def test_cold_reads_skip_the_page_cache_and_cached_files_use_it(packed, binary):
    """The default I/O mode: O_DIRECT when none of the file is cached (a cold start), buffered when some is (so a
    preloaded file is used) or when the filesystem refuses O_DIRECT; --buffered-io / --direct-io force one."""
    _, _, path = packed
    cold = run_edgeflow(path, PROMPT, threads=2, evict_cache=True, binary=binary).raw["io_mode"]
    assert cold in ("direct: none of the file is in the page cache", "buffered: the filesystem refuses O_DIRECT")
    path.read_bytes()  # the whole file into the page cache
    warm = run_edgeflow(path, PROMPT, threads=2, binary=binary).raw["io_mode"]
    assert warm.startswith("buffered: ") and "bytes of the file are in the page cache" in warm
    forced = run_edgeflow(path, PROMPT, threads=2, evict_cache=True, binary=binary, extra_args=("--buffered-io",))
    assert forced.raw["io_mode"] == "buffered (asked)"
    assert forced.tokens == run_edgeflow(path, PROMPT, threads=2, evict_cache=True, binary=binary).tokens


def test_direct_io_or_clear_error(packed, binary):
    _, _, path = packed
    res = run(binary, path, "--direct-io", "--tokens", "1,2,3")
    if res.returncode == 0:
        assert len(res.stdout.split()) == 1
    else:  # some filesystems (tmpfs) refuse O_DIRECT
        assert res.returncode == 3 and "O_DIRECT" in res.stderr


def _corrupt(src, dst, offset, value=None):
    data = bytearray(src.read_bytes())
    data[offset] = (data[offset] ^ 0xFF) if value is None else value
    dst.write_bytes(bytes(data))
    return dst


def test_bad_inputs_exit_codes(packed, binary, tmp_path):
    _, _, path = packed
    size = path.stat().st_size
    payload = PackedFile(path).info("model.layers.1.mlp.up_proj.weight").offset  # a byte under a CRC
    cases = [
        ((tmp_path / "missing.efpk", "--tokens", "1"), 3, "cannot open model file"),
        ((path, "--threads", "0", "--tokens", "1"), 2, "--threads needs an integer >= 1"),
        ((path, "--chunk", "x", "--tokens", "1"), 2, "--chunk needs an integer"),
        ((path, "--bogus"), 2, "unknown option --bogus"),
        ((path, "--prompt", tmp_path / "nope.txt"), 3, "cannot open prompt file"),
        ((path, "--tokens", ""), 5, "the prompt is empty"),
        ((path, "--tokens", "1,abc"), 5, "'abc' is not a token id"),
        ((path, "--tokens", "1,256"), 5, "token id 256 at position 1 is outside the vocabulary"),
        ((path, "--ctx", "8", "--tokens", ",".join(["1"] * 9)), 5, "exceeds the context length 8"),
        ((path, "--ctx", "8", "--new-tokens", "5", "--tokens", "1,2,3,4"), 5, "plus 5 new tokens"),
        ((_corrupt(path, tmp_path / "magic.efpk", 0), "--tokens", "1"), 4, "invalid model file"),
        ((_corrupt(path, tmp_path / "meta.efpk", 100), "--tokens", "1"), 4, "invalid model file"),
        ((_corrupt(path, tmp_path / "payload.efpk", payload + 10), "--tokens", "1"), 4, "invalid model file"),
    ]
    trunc = tmp_path / "trunc.efpk"
    trunc.write_bytes(path.read_bytes()[: size // 2])
    cases.append(((trunc, "--tokens", "1"), 4, "invalid model file"))
    garbage = tmp_path / "garbage.efpk"
    garbage.write_bytes(os.urandom(10000))
    cases.append(((garbage, "--tokens", "1"), 4, "invalid model file"))
    for args, code, text in cases:
        res = run(binary, *args)
        assert res.returncode == code, (args, res.returncode, res.stderr)
        assert text in res.stderr, (args, res.stderr)
        assert "Sanitizer" not in res.stderr and "runtime error" not in res.stderr


def test_failure_while_loading_many_layers_does_not_hang(binary, tmp_path):
    # 12 layers: more regions than the loader keeps in flight, so reading is blocked on unpacking when the first
    # compute task fails; the failure must cancel the blocked read instead of waiting forever.
    path = pack_artifact(make_artifact(tiny_llama(seed=8, layers=12), seed=8), tmp_path / "deep.efpk")
    res = run(binary, path, "--tokens", "1,2,256")
    assert res.returncode == 5 and "outside the vocabulary" in res.stderr
    ok = run(binary, path, "--tokens", "1,2,3")
    assert ok.returncode == 0, ok.stderr


def test_run_edgeflow_raises_with_code(packed, binary):
    _, _, path = packed
    with pytest.raises(RuntimeRunError) as e:
        run_edgeflow(path, [1, 999], binary=binary)
    assert e.value.code == 5 and "outside the vocabulary" in str(e.value)


@pytest.mark.skipif(not (shutil.which("aarch64-linux-gnu-g++") and shutil.which("qemu-aarch64-static")),
                    reason="needs the Debian packages g++-aarch64-linux-gnu and qemu-user-static")
def test_static_aarch64_binary_gives_the_same_tokens(packed, binary):
    """The static aarch64 edgeflow-run (Neon/sdot kernels) under qemu: same greedy tokens as the host build."""
    _, _, path = packed
    arm = engine_binary("aarch64")
    host = run(binary, path, "--new-tokens", "4", "--chunk", "4", stdin=" ".join(map(str, PROMPT)))
    res = subprocess.run(["qemu-aarch64-static", str(arm), str(path), "--new-tokens", "4", "--chunk", "4"],
                         input=" ".join(map(str, PROMPT)), capture_output=True, text=True, timeout=300)
    assert host.returncode == 0 and res.returncode == 0, res.stderr
    assert res.stdout.split() == host.stdout.split()


@pytest.mark.parametrize("env, key, name", [("EDGEFLOW_LM_HEAD", "lm_head_kernel", "portable"),
                                            ("EDGEFLOW_ATTENTION", "attention_kernel", "vec128"),
                                            ("EDGEFLOW_DECODE_ATTENTION", "decode_attention_kernel", "vec128"),
                                            ("EDGEFLOW_UNPACK", "unpack_path", "scalar"),
                                            ("EDGEFLOW_CRC32", "crc32_kernel", "table")])
def test_every_kernel_choice_is_named_in_the_report_and_nameable(packed, binary, env, key, name):
    """GEMM, attention (prefill and decode), the LM head, unpack and the CRC-32 follow one rule (kernel_choice.h): the best this CPU runs
    unless an environment variable names another; the report says which ran, and a name the CPU cannot run exits
    with a message listing the ones it can."""
    _, _, path = packed
    args = [binary, path, "--tokens", "3,17,99", "--new-tokens", "2", "--json"]
    plain = subprocess.run(args, capture_output=True, text=True, timeout=120)
    chosen = subprocess.run(args, capture_output=True, text=True, timeout=120, env={**os.environ, env: name})
    assert plain.returncode == chosen.returncode == 0, plain.stderr + chosen.stderr
    assert json.loads(chosen.stdout)[key] == name and json.loads(plain.stdout)[key]
    assert json.loads(plain.stdout)["tokens"] == json.loads(chosen.stdout)["tokens"]  # the same greedy tokens
    bad = subprocess.run(args, capture_output=True, text=True, timeout=120, env={**os.environ, env: "no-such-kernel"})
    assert bad.returncode != 0 and f"{env}=no-such-kernel is not a kernel this CPU can run" in bad.stderr
    assert name in bad.stderr.split("available:")[1]
