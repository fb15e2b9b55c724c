"""The accelerator half on a real phone's NPU: the user's QAIRT SDK and our context binaries pushed over adb, each
layer run by the SDK's qnn-net-run with profiling, and the profile read back with its qnn-profile-viewer.

QNN's phone runtime is not on PyPI: it comes with Qualcomm's QAIRT SDK, which the user points to with
`npu.qairt_root=<folder>`. From it (paths as the SDK lays them out, <V> = the SoC's HTP generation, e.g. V79):
    bin/aarch64-android/qnn-net-run                        runs a context binary on the phone
    lib/aarch64-android/libQnnHtp.so, libQnnSystem.so      the HTP backend and the system library it loads
    lib/aarch64-android/libQnnHtp<V>Stub.so                the CPU side of the FastRPC call into the DSP
    lib/hexagon-<v>/unsigned/libQnnHtp<V>Skel.so           the DSP side
    bin/x86_64-linux-clang/qnn-profile-viewer              turns the binary profile log into text, on the host
On the phone they live in <device.remote_dir>/qnn/ with the binaries and inputs; the push skips what the phone
already holds (AndroidDevice.push). Without the SDK, or on a device that is not a phone, the kinds that need it
write 'not run' rows with the reason: no profile is ever made up.
"""
from __future__ import annotations

import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.npu.compile import CompiledLayer
from harness.npu.config import NpuConfig
from harness.npu.htp import context_binary
from harness.systems.base import NotRun

VIEWER = "bin/x86_64-linux-clang/qnn-profile-viewer"


def sdk_device_files(npu: NpuConfig) -> dict[str, str]:
    """name on the phone -> path inside the QAIRT SDK."""
    v = npu.htp_arch.upper()
    return {"qnn-net-run": "bin/aarch64-android/qnn-net-run",
            "libQnnHtp.so": "lib/aarch64-android/libQnnHtp.so",
            "libQnnSystem.so": "lib/aarch64-android/libQnnSystem.so",
            f"libQnnHtp{v}Stub.so": f"lib/aarch64-android/libQnnHtp{v}Stub.so",
            f"libQnnHtp{v}Skel.so": f"lib/hexagon-{npu.htp_arch}/unsigned/libQnnHtp{v}Skel.so"}


def require_sdk(npu: NpuConfig, device) -> Path:
    """The QAIRT SDK folder, or NotRun naming what is missing."""
    if type(device).__name__ != "AndroidDevice":
        raise NotRun("running QNN context binaries on an NPU needs a Qualcomm phone (device=android); this host has "
                     "only QNN's HTP simulator (experiment=npu_oracle, fidelity with npu=...)")
    if not npu.qairt_root:
        raise NotRun("needs the QAIRT SDK (QNN's phone runtime is not on PyPI): install it and set "
                     "npu.qairt_root=<its folder>")
    root = Path(npu.qairt_root).expanduser()
    missing = [rel for rel in (*sdk_device_files(npu).values(), VIEWER) if not (root / rel).is_file()]
    if missing:
        raise NotRun(f"npu.qairt_root={root} lacks {', '.join(missing)} (a QAIRT SDK for {npu.chipset}, "
                     f"HTP {npu.htp_arch}, is needed)")
    return root


@dataclass(frozen=True)
class LayerProfile:
    execute_us: float  # QNN accelerator (execute) time, mean over the profiled inferences
    op_cycles: dict[str, int]  # per operator (detailed profiling), summed over the inferences


_EXECUTE = re.compile(r"QNN accelerator \(execute\) time\s*:\s*(\d+)\s*us")
_OP = re.compile(r"^\s*(?P<name>[^:\n]+?):OpId_\d+ \(cycles\)\s*:\s*(?P<cycles>\d+)\s*cycles", re.M)


def parse_profile(text: str) -> LayerProfile:
    """qnn-profile-viewer's text: 'QNN accelerator (execute) time : N us' per inference and, with detailed
    profiling, '<op>:OpId_<k> (cycles) : N cycles' per operator."""
    executes = [int(m) for m in _EXECUTE.findall(text)]
    if not executes:
        raise ValueError("the profile has no 'QNN accelerator (execute) time' line: was it run with "
                         "--profiling_level basic or detailed?")
    ops: dict[str, int] = {}
    for m in _OP.finditer(text):
        ops[m["name"].strip()] = ops.get(m["name"].strip(), 0) + int(m["cycles"])
    return LayerProfile(float(np.mean(executes)), ops)


class PhoneProfiler:
    """Runs compiled layers on the phone's NPU with qnn-net-run and returns their profiles."""

    def __init__(self, device, npu: NpuConfig, inferences: int = 3):
        self.device, self.npu, self.inferences = device, npu, inferences
        self.sdk = require_sdk(npu, device)
        self.dir = f"{device.cfg.remote_dir}/qnn"
        for name, rel in sdk_device_files(npu).items():
            device.push(str(self.sdk / rel), f"{self.dir}/{name}")

    def profile(self, name: str, compiled: CompiledLayer, feeds: dict[str, np.ndarray]) -> LayerProfile:
        """Push the layer's context binary and inputs (raw arrays as the graph takes them), run it, read the
        profile. RuntimeError with qnn-net-run's own words when it fails."""
        d, dev = self.dir, self.device
        dev.push(str(context_binary(compiled.wrapper)), f"{d}/{name}.bin")
        with tempfile.TemporaryDirectory(prefix="qnn-phone-") as tmp:
            entries = []
            for x, array in feeds.items():
                raw = Path(tmp) / f"{name}.{x}.raw"
                np.ascontiguousarray(array).tofile(raw)
                entries.append(f"{x}:={d}/{raw.name}")
                dev.push(str(raw), f"{d}/{raw.name}")
            (Path(tmp) / f"{name}.inputs.txt").write_text(" ".join(entries) + "\n")
            dev.push(str(Path(tmp) / f"{name}.inputs.txt"), f"{d}/{name}.inputs.txt")
            out = f"{d}/{name}.out"
            script = (f"cd {d} && rm -rf {out} && LD_LIBRARY_PATH={d} ADSP_LIBRARY_PATH={d} ./qnn-net-run "
                      f"--backend libQnnHtp.so --retrieve_context {name}.bin --input_list {name}.inputs.txt "
                      f"--profiling_level detailed --num_inferences {self.inferences} --output_dir {out}")
            done = dev.run(["sh", "-c", script], timeout=600)
            if done.returncode != 0:
                raise RuntimeError(f"qnn-net-run failed on the phone for {name} (exit {done.returncode}): "
                                   f"{(done.stdout + done.stderr).strip()[-600:]}")
            log = Path(tmp) / "profile.log"
            dev.pull(f"{out}/qnn-profiling-data_0.log", str(log))
            viewer = subprocess.run([str(self.sdk / VIEWER), "--input_log", str(log)], capture_output=True,
                                    text=True, timeout=300)
            if viewer.returncode != 0:
                raise RuntimeError(f"qnn-profile-viewer failed on {name}'s profile: {viewer.stderr.strip()[-600:]}")
            return parse_profile(viewer.stdout)
