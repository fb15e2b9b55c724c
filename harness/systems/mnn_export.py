"""Export a Hugging Face checkpoint to MNN with INT8 (or INT4) weights through `llmexport` (PyPI), safely and offline.

Two traps handled here, without changing the user's environment:
- MNN's converter imports `MNN.tools.utils.log`, which runs `pip install -U aliyun-log-python-sdk` when `aliyun.log`
  is missing (telemetry; the install downgrades protobuf and breaks onnx). The export runs in a subprocess that marks
  that module as unimportable (`sys.modules[...] = None`: its import raises ImportError before any of its code runs;
  the converter catches that and logs nothing), with `aliyun` shadowed the same way and a `pip` on PATH that refuses.
- The `llmexport` console script fails (`No module named 'utils'`): the package's folder goes on sys.path and its
  `llmexport.py` runs as __main__.
Pipeline inside llmexport: torch model -> ONNX (onnx package) -> MNN graph + quantised weights (MNN's converter from
the `mnn` wheel). Needs: llmexport, mnn, onnx, onnxslim, onnxruntime, torch, transformers; all work offline.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from harness.cache import cache_dir, exclusive, progress_note
from harness.cache_ledger import cache_hit
from harness.host import memory_shortfall

COMPLETE = ".complete"
# Runs in the export subprocess: argv = [this, llmexport_pkg_dir, llmexport args...].
_RUNNER = """
import sys
sys.modules["MNN.tools.utils.log"] = None  # the telemetry module: importing it now raises ImportError
sys.modules["aliyun"] = None
sys.modules["aliyun.log"] = None
pkg = sys.argv[1]
sys.path.insert(0, pkg)
sys.argv = [pkg + "/llmexport.py"] + sys.argv[2:]
code = compile(open(sys.argv[0]).read(), sys.argv[0], "exec")
exec(code, {"__name__": "__main__", "__file__": sys.argv[0]})
"""
_REFUSING_PIP = "#!/bin/sh\necho 'edgeflow-bench: pip is disabled during the MNN export' >&2\nexit 1\n"


# llmexport holds the whole model in FP32 and traces it to ONNX: `make bench-scale` measured a 6.6 GB peak for
# shape-qwen1.5-1.8b (1.84e9 parameters), 3.6 bytes per parameter.
EXPORT_BYTES_PER_PARAM = 3.6


class ExportError(RuntimeError):
    """llmexport failed; the message carries its output tail."""


class ExportTooLarge(ExportError):
    """The export would need more memory than this host has available (refused before it starts)."""


def check_memory(checkpoint: Path) -> None:
    """Refuse an export that cannot fit: it would be killed by the OOM killer after minutes, or take the host down."""
    if short := memory_shortfall(checkpoint, EXPORT_BYTES_PER_PARAM):
        need, params, available = short
        raise ExportTooLarge(f"MNN's llmexport loads the whole model in FP32: about {need / 1e9:.0f} GB for "
                             f"{params / 1e9:.1f}B parameters ({EXPORT_BYTES_PER_PARAM} bytes per parameter, measured "
                             f"by make bench-scale), and this host has {available / 1e9:.0f} GB available")


def llmexport_dir() -> Path:
    spec = importlib.util.find_spec("llmexport")
    if spec is None or not spec.submodule_search_locations:
        raise ExportError("the `llmexport` package is not installed: pip install llmexport mnn (see pyproject.toml)")
    return Path(spec.submodule_search_locations[0])


def export(checkpoint: Path, model_name: str, bits: int = 8, quant_block: int = 0, timeout_s: float = 1800,
           out: Path | None = None) -> Path:
    """Directory with config.json, llm.mnn, llm.mnn.weight (`bits`-bit weights, 4 or 8; quant_block 0 = per output
    channel), tokenizer.mtok, llm_config.json; cached (under `out` if given)."""
    if bits not in (4, 8):
        raise ValueError(f"MNN's llmexport quantises weights to 4 or 8 bits, got bits={bits}")
    out = out or cache_dir("mnn", model_name) / f"int{bits}-block{quant_block}"
    if (out / COMPLETE).is_file():
        cache_hit("MNN export", out)
        return out
    with exclusive(out.with_name(out.name + ".lock")):  # parallel jobs: one exports, the others wait and read it
        if not (out / COMPLETE).is_file():
            _export(checkpoint, model_name, bits, quant_block, timeout_s, out)
    return out


def _export(checkpoint: Path, model_name: str, bits: int, quant_block: int, timeout_s: float, out: Path) -> None:
    check_memory(checkpoint)
    pkg = llmexport_dir()
    with tempfile.TemporaryDirectory(prefix="mnn-export-") as tmp, progress_note(f"llmexport {model_name} -> MNN INT{bits}",
                                                                                 ledger=("MNN export", out)):
        tmp = Path(tmp)
        (tmp / "bin").mkdir()
        (tmp / "bin" / "pip").write_text(_REFUSING_PIP)
        (tmp / "bin" / "pip").chmod(0o755)
        (tmp / "run_llmexport.py").write_text(_RUNNER)
        dst = tmp / "model"
        cmd = [sys.executable, str(tmp / "run_llmexport.py"), str(pkg), "--path", str(checkpoint), "--export", "mnn",
               "--quant_bit", str(bits), "--quant_block", str(quant_block), "--dst_path", str(dst),
               "--mnnconvert", str(tmp / "no-local-mnnconvert")]  # a missing path: use the wheel's converter
        env = {**os.environ, "PATH": f"{tmp / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}", "HF_HUB_OFFLINE": "1"}
        res = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp, timeout=timeout_s)
        if res.returncode != 0 or not (dst / "llm.mnn.weight").is_file():
            raise ExportError(f"llmexport failed (exit {res.returncode}):\n{(res.stdout + res.stderr)[-3000:]}")
        shutil.rmtree(dst / "onnx", ignore_errors=True)  # the intermediate ONNX graph is not needed at run time
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(dst, out)
    (out / COMPLETE).write_text(f"llmexport --quant_bit {bits} --quant_block {quant_block} from {checkpoint}\n")
