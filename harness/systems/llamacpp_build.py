"""llama.cpp from source, cached per version: fetch, build the four tools, convert and quantise a checkpoint.

The source is the llama.cpp tree vendored in the `llama-cpp-python` sdist (PyPI is reachable, GitHub is not): the
sdist file fetched from the package index (`_fetch_sdist`), `vendor/llama.cpp` extracted. Built with CMake,
Release, static libraries, tests/examples/server/app off, only the targets we run (~8 min on 2 cores; the full
`pip install llama-cpp-python` takes ~20). Layout under the cache: llamacpp/<V>/src, llamacpp/<V>/build/bin/<tool>,
llamacpp/<V>/models/<model>/{f16,<type>}.gguf.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
from pathlib import Path

from harness.cache import atomic_file, cache_dir, exclusive, progress_note
from harness.cache_ledger import cache_hit

# the tools the harness runs (cold starts, warm throughput, GGUF quantisation, the prompt-id check) and no other:
# on a fresh machine this build is a third of `make test`'s CPU time
TOOLS = ("llama-completion", "llama-bench", "llama-quantize", "llama-tokenize")
CMAKE_FLAGS = [
    "-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=OFF", "-DGGML_NATIVE=ON", "-DLLAMA_BUILD_TOOLS=ON",
    "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_SERVER=OFF", "-DLLAMA_BUILD_APP=OFF",
    "-DLLAMA_BUILD_UI=OFF", "-DLLAMA_USE_PREBUILT_UI=OFF", "-DLLAMA_OPENSSL=OFF",
]
COMPLETE = ".complete"


class BuildError(RuntimeError):
    """A step of fetching or building llama.cpp failed; the message carries the tool's output tail."""


def source_dir(version: str) -> Path:
    """The vendored llama.cpp source of llama-cpp-python==version (downloaded and extracted once)."""
    root = cache_dir("llamacpp", version)
    src = root / "src"
    with exclusive(root / ".source.lock"):
        if not (src / COMPLETE).is_file():
            _download_source(version, root, src)
    return src


def _download_source(version: str, root: Path, src: Path) -> None:
    with tempfile.TemporaryDirectory(dir=root) as tmp, progress_note(f"llama-cpp-python=={version} sdist"):
        sdist = _fetch_sdist(version, Path(tmp))
        prefix = f"{sdist.name[:-len('.tar.gz')]}/vendor/llama.cpp/"
        with tarfile.open(sdist) as tf:
            members = [m for m in tf.getmembers() if m.name.startswith(prefix)]
            if not members:
                raise BuildError(f"{sdist.name} has no vendor/llama.cpp")
            tf.extractall(tmp, members=members, filter="data")
        shutil.rmtree(src, ignore_errors=True)
        os.replace(Path(tmp) / prefix, src)
    (src / COMPLETE).write_text(f"llama-cpp-python=={version}\n")


def _fetch_sdist(version: str, folder: Path) -> Path:
    """llama_cpp_python-V.tar.gz from the package index's simple API (PEP 691 JSON: each file's URL and sha256), the
    sha256 checked. `pip download --no-binary :all:` fetches the same file but first builds the sdist's metadata (a
    scikit-build-core environment and a CMake run): 20-45 s of CPU on an idle 2-core host, over 3 minutes beside a
    busy test suite, in front of llama.cpp's build on a fresh machine. pip remains the way when the index cannot be
    read so (a mirror without the JSON API, no network: pip then says why)."""
    name = f"llama_cpp_python-{version}.tar.gz"
    index = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple").rstrip("/")
    try:
        request = urllib.request.Request(f"{index}/llama-cpp-python/",
                                         headers={"Accept": "application/vnd.pypi.simple.v1+json"})
        with urllib.request.urlopen(request, timeout=60) as listing:
            entry = next(f for f in json.load(listing)["files"] if f["filename"] == name)
        digest, path = hashlib.sha256(), folder / name
        with urllib.request.urlopen(entry["url"], timeout=300) as body, open(path, "wb") as out:
            while chunk := body.read(1 << 20):
                digest.update(chunk)
                out.write(chunk)
        if digest.hexdigest() != entry["hashes"]["sha256"]:
            raise ValueError(f"{name} from {entry['url']} does not match the index's sha256")
        return path
    except (OSError, ValueError, KeyError, StopIteration) as exc:
        (folder / name).unlink(missing_ok=True)  # (pip would take a file of that name as already downloaded)
        print(f"[edgeflow-bench] {name} not fetched from {index} ({exc!r}); asking pip", file=sys.stderr, flush=True)
    _check([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:", "-d", str(folder),
            f"llama-cpp-python=={version}"], "pip download")
    if not (folder / name).is_file():
        found = ", ".join(sorted(p.name for p in folder.iterdir())) or "nothing"
        raise BuildError(f"pip download of llama-cpp-python=={version} left {found} in {folder}, not {name}")
    return folder / name


def build_tools(version: str, tools=TOOLS, jobs: int = 2) -> dict[str, Path]:
    """{tool: binary path}, building the missing ones (niced, -j`jobs`)."""
    src = source_dir(version)
    build = src.parent / "build"
    bins = {t: build / "bin" / t for t in tools}
    with exclusive(src.parent / ".build.lock"):
        missing = [t for t, p in bins.items() if not p.is_file()]
        if missing:
            with progress_note(f"building llama.cpp {version}: {' '.join(missing)} (~8 min on 2 cores)"):
                if not (build / "CMakeCache.txt").is_file():
                    _check(["nice", "-n", "10", "cmake", "-S", str(src), "-B", str(build), *CMAKE_FLAGS],
                           "cmake configure")
                _check(["nice", "-n", "10", "cmake", "--build", str(build), f"-j{jobs}", "--target", *missing],
                       "cmake build")
    return bins


SCORER_SOURCE = Path(__file__).with_name("llamacpp_scorer.cpp")
# The static libraries a client of llama.h links, in link order (libllama first, ggml's base last).
STATIC_LIBS = ("src/libllama.a", "ggml/src/libggml.a", "ggml/src/libggml-cpu.a", "ggml/src/libggml-base.a")


def build_scorer(version: str) -> Path:
    """`edgeflow-llama-scorer` (llamacpp_scorer.cpp): llama.cpp's forward pass as a log-probability server, compiled
    against this version's llama.h and static libraries; the binary's name carries the source's hash, so an edited
    source is rebuilt."""
    src = source_dir(version)
    build = src.parent / "build"
    digest = hashlib.sha256(SCORER_SOURCE.read_bytes()).hexdigest()[:12]
    binary = build / "bin" / f"edgeflow-llama-scorer-{digest}"
    if binary.is_file():  # the usual case: no lock, no look at the tools
        return binary
    build_tools(version, ("llama-completion",))  # the libraries come with any tool
    with exclusive(src.parent / ".scorer.lock"):
        if not binary.is_file():
            _compile_scorer(src, build, binary, version)
    return binary


def _compile_scorer(src: Path, build: Path, binary: Path, version: str) -> None:
    libs = [build / lib for lib in STATIC_LIBS]
    missing = [str(lib) for lib in libs if not lib.is_file()]
    if missing:
        raise BuildError(f"llama.cpp {version} build has no {', '.join(missing)}")
    partial = binary.with_suffix(".partial")
    with progress_note(f"building edgeflow-llama-scorer against llama.cpp {version}"):
        _check(["g++", "-O2", "-std=c++17", "-I", str(src / "include"), "-I", str(src / "ggml" / "include"),
                str(SCORER_SOURCE), *map(str, libs), "-fopenmp", "-lpthread", "-ldl", "-lm", "-o", str(partial)],
               "compiling edgeflow-llama-scorer")
    os.replace(partial, binary)


def convert_to_gguf(checkpoint: Path, out: Path, version: str) -> Path:
    """FP16 GGUF of a Hugging Face checkpoint directory with the converter of the same llama.cpp source."""
    if out.is_file():
        cache_hit("GGUF F16", out)
        return out
    src = source_dir(version)
    out.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src / "gguf-py"), os.environ.get("PYTHONPATH", "")]),
           "HF_HUB_OFFLINE": "1"}
    with progress_note(f"convert_hf_to_gguf {checkpoint.name} -> {out.name}", ledger=("GGUF F16", out)), \
            atomic_file(out) as partial:
        _check([sys.executable, str(src / "convert_hf_to_gguf.py"), str(checkpoint), "--outtype", "f16",
                "--outfile", str(partial)], "convert_hf_to_gguf.py", env=env)
    return out


def quantize(f16: Path, out: Path, gguf_type: str, version: str) -> Path:
    """`llama-quantize f16 out TYPE` (e.g. Q8_0, Q4_0, Q4_K_M), cached."""
    if out.is_file():
        cache_hit(f"GGUF {gguf_type}", out)
        return out
    tool = build_tools(version, ("llama-quantize",))["llama-quantize"]
    with progress_note(f"llama-quantize {f16.name} -> {gguf_type}", ledger=(f"GGUF {gguf_type}", out)), \
            atomic_file(out) as partial:
        _check([str(tool), str(f16), str(partial), gguf_type], "llama-quantize")
    return out


def model_gguf(checkpoint: Path, model_name: str, gguf_type: str, version: str) -> Path:
    """The model quantised to `gguf_type` (F16 = the converted file itself)."""
    folder = cache_dir("llamacpp", version, "models", model_name)
    f16 = convert_to_gguf(checkpoint, folder / "f16.gguf", version)
    if gguf_type.upper() == "F16":
        return f16
    return quantize(f16, folder / f"{gguf_type}.gguf", gguf_type, version)


def _check(cmd: list[str], what: str, env: dict | None = None) -> None:
    res = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if res.returncode != 0:
        tail = (res.stdout + res.stderr)[-3000:]
        raise BuildError(f"{what} failed (exit {res.returncode}): {' '.join(cmd)}\n{tail}")


def main(argv: list[str] | None = None) -> None:
    """python harness/systems/llamacpp_build.py VERSION: the four tools and the scorer, built ahead of their first
    use. Needs only the standard library, so `make` starts it on a fresh machine while the venv is still installing
    (the Makefile's LLAMACPP_EARLY); whoever needs llama.cpp meanwhile waits on the build's lock."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__.split(":")[0])
    parser.add_argument("version", help="the llama-cpp-python sdist whose vendor/llama.cpp is built, e.g. 0.3.36")
    args = parser.parse_args(argv)
    build_tools(args.version)
    print(f"llama.cpp {args.version}: scorer {build_scorer(args.version)}", flush=True)


if __name__ == "__main__":
    main()
