import pytest

from harness.measure.prompts import SOURCES, PromptsConfig, make_prompts


def test_config_errors_name_the_key():
    with pytest.raises(ValueError, match="prompts.source"):
        PromptsConfig(source="wikipedia")
    with pytest.raises(ValueError, match="prompts.prompt_tokens"):
        PromptsConfig(prompt_tokens=0)


@pytest.mark.real_model
@pytest.mark.parametrize("source", sorted(SOURCES))
def test_prompts_have_the_exact_length_and_round_trip(default_model_spec, source):
    from transformers import AutoTokenizer

    from harness.models.zoo import checkpoint_dir

    tok = AutoTokenizer.from_pretrained(checkpoint_dir(default_model_spec))
    prompts = make_prompts(PromptsConfig(source=source, count=3, prompt_tokens=128), tok)
    assert [len(p) for p in prompts] == [128] * 3 and len({tuple(p) for p in prompts}) == 3
    for p in prompts:
        assert tok.encode(tok.decode(p), add_special_tokens=False) == p
    with pytest.raises(ValueError, match="too few"):
        make_prompts(PromptsConfig(source=source, count=100, prompt_tokens=30000, stride=30000), tok)
