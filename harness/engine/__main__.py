"""python -m harness.engine build|test [--arch host|aarch64|all] | fuzz [--seconds N] | sanitize"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys

from harness.engine.build import build, ctest


def _fuzz(seconds: int) -> int:
    from harness.pack.fuzz_corpus import write_corpus

    out = build("fuzz", "fuzz_reader")
    corpus = write_corpus(out / "corpus")
    cmd = [str(out / "fuzz_reader"), f"-max_total_time={seconds}", "-max_len=65536", "-print_final_stats=1",
           f"-artifact_prefix={out}/crash-", str(corpus)]
    print(" ".join(cmd), flush=True)
    return subprocess.run(cmd).returncode


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m harness.engine", description="build and test edgeflow_runtime")
    ap.add_argument("command", choices=["build", "test", "fuzz", "sanitize"],
                    help="sanitize: build with AddressSanitizer + UBSan and run the C++ tests")
    ap.add_argument("--arch", choices=["host", "aarch64", "all"], default="host")
    ap.add_argument("--seconds", type=int, default=60, help="fuzz: libFuzzer -max_total_time")
    a = ap.parse_args(argv)
    if a.command == "fuzz":
        sys.exit(_fuzz(a.seconds))
    if a.command == "sanitize":
        print(ctest("sanitize")[-3000:])
        return
    for arch in ["host", "aarch64"] if a.arch == "all" else [a.arch]:
        if arch == "aarch64" and not (shutil.which("aarch64-linux-gnu-g++") and shutil.which("qemu-aarch64-static")):
            sys.exit("aarch64 needs the Debian packages g++-aarch64-linux-gnu and qemu-user-static")
        if a.command == "build":
            print(f"{arch}: built in {build(arch)}")
        else:
            print(ctest(arch))


if __name__ == "__main__":
    main()
