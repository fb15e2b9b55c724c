"""Each INT8 GEMM kernel this CPU can run is dispatched and checked bit-exact against the scalar reference here
(test_gemm runs every kernel `available_gemm_kernels` lists), and the best of every kernel list (GEMM, A16 GEMM,
unpack, attention, decode attention, LM head, CRC-32) is the one the engine runs and reports. The expected list comes
from /proc/cpuinfo, independently of the runtime's own CPUID checks, so a kernel the CPU has but the dispatch misses
(as AVX-VNNI could be, on a compiler that does not know the flag) fails here."""
import json
import platform
import re
import subprocess

import pytest

from harness.engine.build import engine_binary
from harness.host import cpu_flags
from harness.pack import pack_artifact
from tests.runtime.conftest import make_artifact, tiny_llama

pytestmark = pytest.mark.native


def expected_kernels(flags: set[str], machine: str) -> list[str]:
    """The kernels, in the dispatch's order (the last is the best), a CPU with `flags` runs."""
    if machine == "aarch64":
        return ["ref", "neon"] + (["neon-sdot"] if "asimddp" in flags else [])
    kernels = ["ref"]
    if "avx2" in flags:
        kernels.append("avx2")
        if "avx_vnni" in flags:
            kernels.append("avx-vnni")
    if {"avx512f", "avx512bw", "avx512vl", "avx512_vnni"} <= flags:
        kernels.append("avx512-vnni")
        if {"amx_tile", "amx_int8"} <= flags:  # (Linux lists them only where it can give a process the tile state)
            kernels.append("amx")
    return kernels


def expected_choices(flags: set[str], machine: str) -> dict[str, str]:
    """The kernel each of the engine's lists picks on a CPU with `flags`, under the keys of edgeflow-run's report."""
    if machine == "aarch64":
        return {"gemm_kernel": expected_kernels(flags, machine)[-1], "gemm16_kernel": "neon", "unpack_path": "neon",
                "attention_kernel": "vec128", "decode_attention_kernel": "vec128", "lm_head_kernel": "portable",
                "crc32_kernel": "armv8-crc" if "crc32" in flags else "table"}
    avx2, avx512 = "avx2" in flags, {"avx512f", "avx512bw", "avx512vl"} <= flags  # every AVX-512 kernel needs the 3
    widest = "avx512" if avx512 else "avx2" if avx2 else None
    gemm16 = "avx512-vnni" if avx512 and "avx512_vnni" in flags else "avx2" if avx2 else "ref"
    return {"gemm_kernel": expected_kernels(flags, machine)[-1], "gemm16_kernel": gemm16,
            "unpack_path": "avx2" if avx2 else "sse", "attention_kernel": widest or "vec128",
            "decode_attention_kernel": "avx512-decode" if avx512 else widest or "vec128",
            "lm_head_kernel": widest or "portable",
            "crc32_kernel": "pclmul" if {"pclmulqdq", "sse4_1"} <= flags else "table"}


@pytest.fixture(scope="module")
def tiny_packed(tmp_path_factory):
    return pack_artifact(make_artifact(tiny_llama(seed=5, tie=False), seed=6),
                         tmp_path_factory.mktemp("packed") / "tiny.efpk", layout="weightlet")


def test_the_engine_runs_the_best_kernel_of_every_list_this_cpu_has(tiny_packed):
    """What edgeflow-run reports it ran, list by list (GEMM, A16 GEMM, unpack, attention, decode attention, LM head,
    CRC-32),
    is what /proc/cpuinfo says this CPU runs best: a list that misses a kernel, or offers one on a CPU without the
    features it needs (AVX-512 F alone, say), fails here on the host that shows it."""
    run = subprocess.run([str(engine_binary("host")), str(tiny_packed), "--tokens", "3,17,99", "--new-tokens", "2",
                          "--json"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    report = json.loads(run.stdout)
    want = expected_choices(cpu_flags(), platform.machine())
    assert {k: report[k] for k in want} == want


def test_every_kernel_this_cpu_runs_is_tested_bit_exact_and_the_best_is_chosen(capsys):
    run = subprocess.run([str(engine_binary("host", "test_gemm"))], capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    m = re.search(r"(\d+) kernel comparisons; kernels: ([\w\- ]+); best: ([\w-]+)", run.stdout)
    assert m, run.stdout[-500:]
    tested, best = m.group(2).split(), m.group(3)
    want = expected_kernels(cpu_flags(), platform.machine())
    assert tested == want, f"this CPU runs {want}; the dispatch offers {tested}"
    assert best == want[-1] and int(m.group(1)) > 1000
    with capsys.disabled():  # say which kernels this host could check (AVX-VNNI and AMX need an Intel CPU that has them)
        print(f"\n  GEMM kernels tested bit-exact on this CPU: {' '.join(tested)}; dispatched: {best}")


def test_the_int8_benchmark_runs_every_kernel_and_its_instruction():
    """edgeflow-bench-int8 (make bench-runtime's INT8 peak) on every kernel this CPU runs, briefly: each kernel's
    ceiling instruction is measured (AMX's tdpbssd too, whose tile setup once faulted), the peak is the best of them;
    the A16 kernels likewise, against theirs."""
    run = subprocess.run([str(engine_binary("host", "edgeflow-bench-int8")), "1", "0.01"], capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    report = json.loads(run.stdout)
    kernels = report["gemm_kernels"]
    assert list(kernels) == expected_kernels(cpu_flags(), platform.machine())[1:]  # all but the scalar reference
    for name, k in kernels.items():  # (aarch64's plain Neon kernel has no single ceiling instruction)
        assert k["layer_gops"] > 0, name
        assert k["instruction"] in report["instruction_gops"] or (name, platform.machine()) == ("neon", "aarch64")
    assert report["int8_peak_gops"] == pytest.approx(max(report["instruction_gops"].values()), abs=0.01)
    # the A16 kernels beside them, each against its own instruction (pmaddwd, vpdpwssd), never the INT8 peak's
    want16 = expected_choices(cpu_flags(), platform.machine())["gemm16_kernel"]
    assert want16 in report["gemm16_kernels"] and report["gemm16_kernel"] == want16
    for name, k in report["gemm16_kernels"].items():
        assert k["layer_gops"] > 0, name
        assert k["instruction"] in report["a16_instruction_gops"] or platform.machine() == "aarch64", name
