import pytest

from harness.data import hub
from harness.data.hub import DatasetUnavailable, hub_status, load_from_hub


@pytest.fixture(autouse=True)
def fresh_status():
    hub_status.cache_clear()
    yield
    hub_status.cache_clear()


def _never_called():
    raise AssertionError("load must not run when the hub is unreachable")


def test_offline_variable_is_the_reason(monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    assert hub_status() == "HF_DATASETS_OFFLINE=1"


def test_unreachable_hub_fails_without_trying(monkeypatch):
    monkeypatch.setattr(hub, "hub_status", lambda: "cannot connect to huggingface.co:443 (no route)")
    with pytest.raises(DatasetUnavailable, match=r"lm-eval task 'x' needs the Hugging Face hub.*no route.*or use y"):
        load_from_hub("lm-eval task 'x'", _never_called, "use y")


def test_probe_of_an_unresolvable_endpoint_answers_quickly(monkeypatch):
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "https://hub.invalid")  # .invalid never resolves (RFC 2606)
    assert hub_status().startswith("cannot connect to hub.invalid:443") or "no answer" in hub_status()


def test_offline_cache_miss_is_reported_as_unavailable(monkeypatch):
    monkeypatch.setattr(hub, "hub_status", lambda: "HF_HUB_OFFLINE=1")

    def cache_miss():
        raise ConnectionError("Couldn't reach 'wikitext' on the Hub (OfflineModeIsEnabled)")

    with pytest.raises(DatasetUnavailable, match="not in the local Hugging Face cache"):
        load_from_hub("WikiText-2", cache_miss, "use z")
    assert load_from_hub("WikiText-2", lambda: 42, "use z") == 42


def test_reachable_hub_passes_errors_through(monkeypatch):
    monkeypatch.setattr(hub, "hub_status", lambda: "")
    with pytest.raises(KeyError):
        load_from_hub("x", lambda: {}["missing"], "use z")
