import pytest
import torch

from harness.data import hub
from harness.data.hub import DatasetUnavailable
from harness.data.streams import (LOCAL_PPL_PROTOCOL, calibration_tokens, local_ppl_tokens,
                                  wikitext2_test_tokens)


def test_local_ppl_stream_is_the_perplexity_split_tokenized_once(corpus, tokenizer):
    stream = local_ppl_tokens(tokenizer)
    assert stream.protocol == LOCAL_PPL_PROTOCOL and "proxy (local, Shakespeare corpus)" in stream.protocol
    assert stream.ids.tolist() == tokenizer(corpus.split_text("perplexity")).input_ids
    assert tokenizer.decode(stream.ids[:50]) in corpus.split_text("perplexity")


def test_calibration_windows_are_seeded_slices_of_the_calibration_split(corpus, tokenizer):
    batch = calibration_tokens(tokenizer, n_samples=6, seq_len=64, seed=3)
    assert batch.shape == (6, 64) and (batch == calibration_tokens(tokenizer, 6, 64, seed=3)).all()
    assert not (batch == calibration_tokens(tokenizer, 6, 64, seed=4)).all()
    calibration_text = corpus.split_text("calibration")
    for row in batch:
        assert tokenizer.decode(row[1:-1]) in calibration_text
    with pytest.raises(ValueError, match="seq_len"):
        calibration_tokens(tokenizer, 1, 10**7)


def test_wikitext2_offline_is_a_clear_error(monkeypatch, tokenizer):
    monkeypatch.setattr(hub, "hub_status", lambda: "cannot connect to huggingface.co:443 (no route)")
    with pytest.raises(DatasetUnavailable, match="WikiText-2.*needs the Hugging Face hub.*local_ppl_tokens"):
        wikitext2_test_tokens(tokenizer)


def test_fidelity_texts_are_the_held_out_split_or_out_of_domain_english(corpus, tokenizer):
    from harness.data.streams import fidelity_tokens, local_ppl_tokens

    assert torch.equal(fidelity_tokens(tokenizer, "ppl-local").ids, local_ppl_tokens(tokenizer).ids)
    docs = fidelity_tokens(tokenizer, "python-docs")
    assert docs.ids.numel() > 50_000 and "out-of-domain English" in docs.protocol
    with pytest.raises(ValueError, match="fidelity_text must be one of"):
        fidelity_tokens(tokenizer, "wikitext")
