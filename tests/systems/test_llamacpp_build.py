"""llama.cpp's source comes from the package index's simple API, sha256-checked, with pip as the fallback; served
here by a local HTTP index (a PEP 691 JSON listing and the file)."""
import hashlib
import http.server
import json
import threading

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
    monkeypatch.setattr(llamacpp_build, "_check", lambda cmd, what, env=None: pip_calls.append(cmd))
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
    assert not (tmp_path / NAME).exists()  # the mismatched bytes are gone before pip looks
    llamacpp_build._fetch_sdist("1.0.0", tmp_path)  # not listed
    assert [c[c.index("download"):] for c in pip_calls] == [
        ["download", "-q", "--no-deps", "--no-binary", ":all:", "-d", str(tmp_path), f"llama-cpp-python=={v}"]
        for v in ("9.9.9", "1.0.0")]
