"""The quantized-artifact cache: parallel jobs that need the same artifact make it once (the others wait on its
lock and take it from the cache)."""
import threading
import time
from types import SimpleNamespace

from harness.artifact import MANIFEST
from harness.quant import cache


def test_two_jobs_wanting_one_artifact_make_it_once(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGEFLOW_CACHE", str(tmp_path))
    made = []

    def make(model_spec, config, path, tokenizer):
        made.append(path)
        time.sleep(0.3)  # long enough that the second job arrives while the first is making it
        path.mkdir(parents=True)
        (path / MANIFEST).write_text("{}")
        return path

    monkeypatch.setattr(cache, "_make_artifact", make)
    spec = SimpleNamespace(name="tiny-lock-test")
    got = []
    jobs = [threading.Thread(target=lambda: got.append(cache.quantized_artifact(spec, {"name": "edgeflow"})))
            for _ in range(2)]
    for j in jobs:
        j.start()
    for j in jobs:
        j.join()
    assert len(made) == 1 and got[0] == got[1] == made[0]
