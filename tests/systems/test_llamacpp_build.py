"""llama.cpp's source comes from the package index's simple API, sha256-checked, with pip as the fallback; served
here by a local HTTP index (a PEP 691 JSON listing and the file)."""
import hashlib
import http.server
import json
import threading
from pathlib import Path

import pytest

from harness.systems import llamacpp_build

NAME = "llama_cpp_python-9.9.9.tar.gz"
PAYLOAD = b"not really a tarball, only bytes with a digest"


@pytest.fixture
def index(monkeypatch):
    """A local index whose listing names NAME with the sha256 in `listed` (PAYLOAD's, unless a test changes it)."""
    listed = {"sha256": hashlib.sha256(PAYLOAD).hexdigest()}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path == "/simple/llama-cpp-python/":
                body = json.dumps({"files": [{"filename": NAME, "url": f"{base}/files/{NAME}",
                                              "hashes": dict(listed)}]}).encode()
            elif self.path == f"/files/{NAME}":
                body = PAYLOAD
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    monkeypatch.setenv("PIP_INDEX_URL", f"{base}/simple")
    pip_calls = []

    def pip(cmd, what, env=None):  # pip's part: the named sdist appears in the -d folder
        pip_calls.append(cmd)
        sdist = Path(cmd[cmd.index("-d") + 1]) / f"llama_cpp_python-{cmd[-1].split('==')[1]}.tar.gz"
        assert not sdist.exists(), "pip takes a file already there as downloaded: a mismatched one must be gone"
        sdist.write_bytes(PAYLOAD)

    monkeypatch.setattr(llamacpp_build, "_check", pip)
    yield listed, pip_calls
    server.shutdown()


def test_the_sdist_comes_from_the_index_without_pip(index, tmp_path):
    _, pip_calls = index
    path = llamacpp_build._fetch_sdist("9.9.9", tmp_path)
    assert path == tmp_path / NAME and path.read_bytes() == PAYLOAD
    assert pip_calls == []


def test_a_digest_mismatch_or_a_missing_file_falls_back_to_pip(index, tmp_path, capsys):
    listed, pip_calls = index
    listed["sha256"] = "0" * 64
    assert llamacpp_build._fetch_sdist("9.9.9", tmp_path) == tmp_path / NAME
    assert "does not match the index's sha256" in capsys.readouterr().err
    assert llamacpp_build._fetch_sdist("1.0.0", tmp_path) == tmp_path / "llama_cpp_python-1.0.0.tar.gz"  # not listed
    assert [c[c.index("download"):] for c in pip_calls] == [
        ["download", "-q", "--no-deps", "--no-binary", ":all:", "-d", str(tmp_path), f"llama-cpp-python=={v}"]
        for v in ("9.9.9", "1.0.0")]


def test_a_pip_that_writes_another_name_is_a_build_error(index, tmp_path, monkeypatch):
    listed, _ = index
    listed["sha256"] = "0" * 64
    monkeypatch.setattr(llamacpp_build, "_check", lambda cmd, what, env=None: (tmp_path / "other.zip").write_bytes(b""))
    with pytest.raises(llamacpp_build.BuildError, match=r"left other.zip in .*, not llama_cpp_python-9.9.9.tar.gz"):
        llamacpp_build._fetch_sdist("9.9.9", tmp_path)
