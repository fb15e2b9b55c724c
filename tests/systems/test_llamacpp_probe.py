"""The llama.cpp kernel probe (harness/systems/llamacpp_probe.py), driven by stand-in binaries that crash the way
llama.cpp 0.3.36's AMX path does on some Xeons (SIGSEGV unless --no-repack), and by the real build."""
import signal
import stat

import pytest

from harness.measure.cold import EngineError
from harness.systems.llamacpp_probe import BY_NAME, PATHS, probe_completion, weight_buffers

# Prints what llama-completion prints on success: the buffer line, the perf line on stderr, a token on stdout.
STANDIN = """#!/bin/sh
echo "$*" >> "{calls}"
{crash}
echo "load_tensors:   CPU_Mapped model buffer size =    12.00 MiB" >&2
echo "common_perf_print: prompt eval time =       5.00 ms /    60 tokens" >&2
printf 'x'
"""
CRASH_UNLESS_NO_REPACK = 'case " $* " in *" --no-repack "*) ;; *) kill -SEGV $$ ;; esac'


def standin(tmp_path, crash: str):
    binary = tmp_path / "llama-completion"
    binary.write_text(STANDIN.format(calls=tmp_path / "calls.txt", crash=crash))
    binary.chmod(binary.stat().st_mode | stat.S_IEXEC)
    (tmp_path / "tiny.gguf").write_bytes(b"GGUF")
    return binary


def calls(tmp_path) -> list[str]:
    path = tmp_path / "calls.txt"
    return path.read_text().splitlines() if path.exists() else []


def test_a_crashing_extra_buffer_path_falls_back_to_no_repack_once(tmp_path, capsys):
    binary = standin(tmp_path, CRASH_UNLESS_NO_REPACK)
    cache = tmp_path / "probe" / "Q8_0-t2.json"
    result = probe_completion(binary, tmp_path / "tiny.gguf", 2, cache)
    assert result.path is BY_NAME["no-repack"] and not result.cached
    assert [t["path"] for t in result.tried] == ["extra-buffers", "no-repack"]
    assert result.tried[0]["what"] == f"crashed ({signal.SIGSEGV.name})" and result.tried[1]["ok"]
    note = result.note()
    assert note.startswith("llama.cpp kernel path: no-repack") and "extra-buffers crashed (SIGSEGV)" in note
    assert "faster paths failed on this host" in capsys.readouterr().err  # said once, when probed
    assert len(calls(tmp_path)) == 2 and "-t 2 -tb 2" in calls(tmp_path)[0]

    again = probe_completion(binary, tmp_path / "tiny.gguf", 2, cache)  # the cached answer: nothing runs
    assert again.cached and again.path is result.path and len(calls(tmp_path)) == 2
    assert capsys.readouterr().err == ""
    probe_completion(binary, tmp_path / "tiny.gguf", 1, tmp_path / "probe" / "Q8_0-t1.json")  # another key probes
    assert len(calls(tmp_path)) == 4


def test_weight_buffers_are_read_from_llamacpp_own_lines():
    log = ("0.00.090.001 I load_tensors:          AMX model buffer size =    98.25 MiB\n"
           "0.00.090.002 I load_tensors:   CPU_Mapped model buffer size =   136.73 MiB\n"
           "0.00.170.564 I llama_kv_cache:        CPU KV buffer size =   180.00 MiB\n")
    assert weight_buffers(log) == "AMX 98.2 MiB, CPU_Mapped 136.7 MiB" and weight_buffers("") == "not reported"


def test_a_changed_binary_is_probed_again(tmp_path):
    binary = standin(tmp_path, CRASH_UNLESS_NO_REPACK)
    cache = tmp_path / "probe.json"
    assert probe_completion(binary, tmp_path / "tiny.gguf", 2, cache).path.name == "no-repack"
    binary.write_text(STANDIN.format(calls=tmp_path / "calls.txt", crash=""))  # rebuilt: AMX fixed
    result = probe_completion(binary, tmp_path / "tiny.gguf", 2, cache)
    assert result.path.name == "extra-buffers" and not result.cached and len(result.tried) == 1
    assert result.note() == (f"llama.cpp kernel path: extra-buffers ({PATHS[0].describes}; probe ran (weights in "
                             "CPU_Mapped 12.0 MiB))")


def test_a_binary_that_fails_on_every_path_is_a_clear_error(tmp_path):
    binary = standin(tmp_path, "kill -SEGV $$")
    with pytest.raises(EngineError, match="fails on this host in every kernel path: extra-buffers: crashed "
                                          r"\(SIGSEGV\); no-repack: crashed \(SIGSEGV\)"):
        probe_completion(binary, tmp_path / "tiny.gguf", 2, tmp_path / "probe.json")
    assert not (tmp_path / "probe.json").exists()  # nothing cached: the next run probes again
    binary = standin(tmp_path, 'echo "error: unknown argument" >&2; exit 1')
    with pytest.raises(EngineError, match="exited with status 1"):
        probe_completion(binary, tmp_path / "tiny.gguf", 2, tmp_path / "probe.json")


@pytest.mark.real_model
def test_the_real_build_runs_its_fastest_path_here(default_model_spec):
    """On this host's llama.cpp build; an AMX host whose AMX path crashes gets no-repack and says why."""
    from harness.systems import llamacpp_build as build
    from harness.systems.llamacpp_probe import host_fingerprint, kernel_path

    tools = build.build_tools("0.3.36")
    result = kernel_path(tools, "0.3.36", "Q8_0", 2)
    assert result.tried[-1]["ok"] and result.tried[-1]["what"].startswith("ran (weights in ")
    amx = " amx_int8 " in f" {host_fingerprint().split('|')[1]} "
    if not amx:  # without AMX, nothing in the default path is known to crash
        assert result.path.name == "extra-buffers", result.tried
