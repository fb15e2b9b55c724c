"""The cache ledger (harness/cache_ledger.py): what a run took from the caches and what it made, across processes,
with anything made twice named; and artifact cache keys that follow the code an artifact depends on."""
import json
import os
import shutil
from pathlib import Path

from harness import cache_ledger
from harness.artifact import save_artifact
from harness.cache_ledger import LEDGER_ENV, ledger_at, read, report, summary


def test_hits_and_makes_are_counted_and_a_second_make_is_named(tmp_path, monkeypatch):
    ledger = tmp_path / "ledger.jsonl"
    monkeypatch.setenv(LEDGER_ENV, str(ledger))
    cache_ledger.cache_made("packed file", "/c/packed/m/a.efpk", 2.0)
    cache_ledger.cache_hit("packed file", "/c/packed/m/a.efpk")
    cache_ledger.cache_made("GGUF Q8_0", "/c/models/m/Q8_0.gguf", 5.0)
    cache_ledger.cache_made("GGUF Q8_0", "/c/models/m/Q8_0.gguf", 4.0)  # made again: a bug the report must name
    got = summary(read(ledger))
    assert got["packed file"] == {"hits": 1, "made": 1, "made_s": 2.0, "made_twice": []}
    assert got["GGUF Q8_0"]["made"] == 2 and got["GGUF Q8_0"]["made_twice"] == ["/c/models/m/Q8_0.gguf"]
    text = report(read(ledger))
    assert "packed file: 1 from the cache, 1 made (2 s)" in text
    assert "MADE MORE THAN ONCE: m/Q8_0.gguf" in text
    assert [e["kind"] for e in cache_ledger.events()[-4:]] == ["packed file"] * 2 + ["GGUF Q8_0"] * 2


def test_ledger_at_sees_child_processes_and_restores_the_environment(tmp_path, monkeypatch):
    import subprocess
    import sys

    monkeypatch.delenv(LEDGER_ENV, raising=False)
    path = tmp_path / "runs" / "cache-ledger.jsonl"
    path.parent.mkdir()
    path.write_text(json.dumps({"kind": "old", "key": "k", "hit": True, "made_s": None, "pid": 1, "time": 0}) + "\n")
    with ledger_at(path) as recorded:
        assert os.environ[LEDGER_ENV] == str(path)
        subprocess.run([sys.executable, "-c", "from harness.cache_ledger import cache_hit; "
                        "cache_hit('quantized artifact', '/c/artifacts/m/edgeflow-5-abc')"], check=True)
        cache_ledger.cache_made("packed file", "/c/p.efpk", 1.5)
        kinds = [e["kind"] for e in recorded()]
    assert kinds == ["quantized artifact", "packed file"]  # not the earlier run's event
    assert LEDGER_ENV not in os.environ


def test_packed_file_is_made_once_then_taken_from_the_cache(tmp_path, monkeypatch):
    from harness.systems.edgeflow import packed_file
    from tests.runtime.conftest import make_artifact, tiny_llama

    monkeypatch.setenv("EDGEFLOW_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv(LEDGER_ENV, str(tmp_path / "ledger.jsonl"))
    art_dir = save_artifact(make_artifact(tiny_llama(seed=1)), tmp_path / "uniform-8-abc")
    first = packed_file("tiny", art_dir, "weightlet")
    assert packed_file("tiny", art_dir, "weightlet") == first
    got = summary(read(tmp_path / "ledger.jsonl"))["packed file"]
    assert (got["hits"], got["made"], got["made_twice"]) == (1, 1, [])


def test_an_edit_to_one_quantizer_keeps_the_others_artifacts(tmp_path):
    from harness.quant import cache

    package = Path(cache.__file__).parent
    copy = tmp_path / "quant"
    shutil.copytree(package, copy, ignore=shutil.ignore_patterns("__pycache__"))
    own = {q: copy / "methods" / f"{q}.py" for q in ("edgeflow", "cmpq")}
    before = {q: cache.code_digest(p, copy) for q, p in own.items()}
    assert before["edgeflow"] != before["cmpq"]
    with open(own["cmpq"], "a") as f:
        f.write("\n# an edit\n")
    after = {q: cache.code_digest(p, copy) for q, p in own.items()}
    assert after["edgeflow"] == before["edgeflow"] and after["cmpq"] != before["cmpq"]
    with open(copy / "numerics.py", "a") as f:  # shared code: every quantizer's artifacts are made again
        f.write("\n# an edit\n")
    assert all(cache.code_digest(p, copy) != after[q] for q, p in own.items())


def test_a_quantizer_without_a_module_file_depends_on_all_quantizer_code(tmp_path):
    from harness.quant import cache

    copy = tmp_path / "quant"
    shutil.copytree(Path(cache.__file__).parent, copy, ignore=shutil.ignore_patterns("__pycache__"))
    before = cache.code_digest(None, copy)
    with open(copy / "methods" / "cmpq.py", "a") as f:
        f.write("\n# an edit\n")
    assert cache.code_digest(None, copy) != before
    assert cache._own_module(type("Exec", (), {"__module__": "not_a_file"})) is None
