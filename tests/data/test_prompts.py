import pytest

from harness.data.config import load_dataset_config
from harness.data.hub import DatasetUnavailable
from harness.data.prompts import CORPUS_PROMPT_LABEL, fixed_length_prompts, prompt_set

DATASETS = ("lambada", "winogrande", "openbookqa", "mmlu", "hellaswag")


def _check_band(tokenizer, prompts, lo, hi):
    for p in prompts:
        assert lo <= p.n_tokens <= hi
        assert tuple(tokenizer(p.text, add_special_tokens=False).input_ids) == p.ids and len(p.ids) == p.n_tokens


def test_prompts_fall_in_the_band_and_retokenize_exactly(corpus, tokenizer):
    cfg = load_dataset_config("winogrande")
    prompts = prompt_set(tokenizer, cfg, n=12)
    assert [p.index for p in prompts] == list(range(12)) and {p.source for p in prompts} == {CORPUS_PROMPT_LABEL}
    _check_band(tokenizer, prompts, cfg.prompt_tokens_min, cfg.prompt_tokens_max)
    assert len({p.n_tokens for p in prompts}) > 1  # lengths are drawn from the band, not all one value


def test_prompts_are_seeded(corpus, tokenizer):
    cfg = load_dataset_config("lambada")
    assert prompt_set(tokenizer, cfg, n=5) == prompt_set(tokenizer, cfg, n=5)
    assert prompt_set(tokenizer, cfg, n=5) != prompt_set(tokenizer, cfg, n=5, seed=cfg.seed + 1)


def test_fixed_length_mode(corpus, tokenizer):
    prompts = fixed_length_prompts(tokenizer, 128, n=4)
    assert [p.n_tokens for p in prompts] == [128] * 4 and len({p.text for p in prompts}) == 4
    _check_band(tokenizer, prompts, 128, 128)


def test_real_dataset_prompts_say_they_need_the_hub(corpus, tokenizer):
    with pytest.raises(DatasetUnavailable, match="real mmlu prompts need the dataset from the Hugging Face hub"):
        prompt_set(tokenizer, load_dataset_config("mmlu"), source="dataset")
    with pytest.raises(ValueError, match="prompt source must be"):
        prompt_set(tokenizer, load_dataset_config("mmlu"), source="web")


@pytest.mark.real_model
def test_table3_bands_with_the_default_models_tokenizer(default_model_spec):
    from transformers import AutoTokenizer

    from harness.models.zoo import checkpoint_dir

    tokenizer = AutoTokenizer.from_pretrained(checkpoint_dir(default_model_spec))
    for name in DATASETS:
        cfg = load_dataset_config(name)
        _check_band(tokenizer, prompt_set(tokenizer, cfg), cfg.prompt_tokens_min, cfg.prompt_tokens_max)
    _check_band(tokenizer, fixed_length_prompts(tokenizer, 128, n=5), 128, 128)
