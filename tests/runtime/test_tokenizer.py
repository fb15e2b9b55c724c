"""edgeflow-run's tokenizer (--prompt-text): the ids of the Hugging Face tokenizer it was written from, and clear
errors for a missing or corrupt tokenizer file, text that is not UTF-8 and characters outside the vocabulary."""
import subprocess

import pytest

from harness.engine.build import engine_binary
from harness.engine.tokenizer_file import UnsupportedTokenizer, write_tokenizer_file

TRICKY = ["Hello world", "don't   stop  believing\n\n  it's 2024!!  ", "  leading spaces", "trailing space ",
          "tabs\tand\nnewlines \n x", "über café naïve 東京 123456 ½ ٣", "a'sb 'll 're'VE 'S", " \n", "x  \t y",
          "emoji 😀 ok\u00a0nbsp\u2003em", "<|endoftext|>one<|endoftext|>", "!!!...???  ---", "1,000,000.50"]


def _tokenize(tok_file, text: str | bytes, tmp_path) -> subprocess.CompletedProcess:
    prompt = tmp_path / "prompt.txt"
    prompt.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return subprocess.run([str(engine_binary("host")), str(tmp_path / "unused.efpk"), "--tokenizer", str(tok_file),
                           "--prompt-text", str(prompt), "--tokenize-only"], capture_output=True, text=True)


def _ids(tok_file, text, tmp_path) -> list[int]:
    res = _tokenize(tok_file, text, tmp_path)
    assert res.returncode == 0, res.stderr
    return [int(x) for x in res.stdout.split()]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A byte-level BPE trained here (GPT-2 pre-tokenizer, no missing bytes), its tokenizer.json and engine file."""
    from harness.data.synthetic import byte_bpe_tokenizer, play_text

    texts = [play_text(f"play{i}", seed=i) for i in range(4)] + TRICKY
    hf = byte_bpe_tokenizer(texts, vocab_size=600)
    folder = tmp_path_factory.mktemp("tok")
    hf.save_pretrained(folder)
    return hf, write_tokenizer_file(folder / "tokenizer.json", folder / "model.efpk.tok"), texts


def test_the_engine_tokenizes_as_hugging_face(trained, tmp_path):
    hf, tok_file, texts = trained
    for text in [*TRICKY, "\n\n".join(texts)]:
        assert _ids(tok_file, text, tmp_path) == hf.encode(text, add_special_tokens=False), text[:40]


def test_bad_input_is_named(trained, tmp_path):
    _, tok_file, _ = trained
    res = _tokenize(tok_file, b"caf\xe9", tmp_path)  # Latin-1, not UTF-8
    assert res.returncode == 5 and "not valid UTF-8" in res.stderr
    res = _tokenize(tmp_path / "missing.tok", "hi", tmp_path)
    assert res.returncode == 3 and "cannot open tokenizer file" in res.stderr and "tokenizer_file.py" in res.stderr
    corrupt = tmp_path / "corrupt.tok"
    corrupt.write_bytes(tok_file.read_bytes()[:5000])
    res = _tokenize(corrupt, "hi", tmp_path)
    assert res.returncode == 3 and "truncated" in res.stderr
    corrupt.write_bytes(b"GGUF" + tok_file.read_bytes()[4:])
    assert "no EFTK magic" in _tokenize(corrupt, "hi", tmp_path).stderr
    res = _tokenize(tok_file, "", tmp_path)
    assert res.returncode == 5 and "empty" in res.stderr


def test_only_byte_level_bpe_is_written(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel({"a": 0, "[UNK]": 1}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(tmp_path / "tokenizer.json"))
    with pytest.raises(UnsupportedTokenizer, match="not BPE.*not ByteLevel"):
        write_tokenizer_file(tmp_path / "tokenizer.json", tmp_path / "x.tok")


@pytest.mark.real_model
def test_the_default_models_tokenizer_on_the_whole_corpus(default_model_spec, tmp_path):
    """SmolLM2's tokenizer over every work of the local corpus (~4.5 MB of text, ~1.2M tokens), and a character
    whose byte SmolLM2's vocabulary lacks: Hugging Face drops it silently, the engine refuses the prompt."""
    from transformers import AutoTokenizer

    from harness.data.corpus import load_corpus
    from harness.models.zoo import checkpoint_dir

    ckpt = checkpoint_dir(default_model_spec)
    tok_file = write_tokenizer_file(ckpt / "tokenizer.json", tmp_path / "smollm2.tok")
    hf = AutoTokenizer.from_pretrained(ckpt)
    text = "\n\n".join(w.text for w in load_corpus().works)
    assert _ids(tok_file, text, tmp_path) == hf.encode(text, add_special_tokens=False)
    for s in TRICKY:
        assert _ids(tok_file, s, tmp_path) == hf.encode(s, add_special_tokens=False), s
    res = _tokenize(tok_file, "a\x04b", tmp_path)
    assert res.returncode == 5 and "outside the vocabulary (byte 0x04" in res.stderr
