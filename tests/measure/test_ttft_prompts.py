"""experiment=ttft's prompts: the dataset's Table 3 band when dataset=... is given, else the prompts group."""
from harness.config import build
from harness.measure.prompts import PromptsConfig
from harness.measure.ttft import prompts_for
from harness.runner.sweep import compose_config
from tests.data.conftest import corpus, sdist, tokenizer  # noqa: F401  (fixtures: stand-in corpus and tokenizer)


def test_dataset_band_prompts_replace_the_prompts_group(corpus, tokenizer):
    cfg = compose_config(["experiment=ttft", "system=mnn", "dataset=openbookqa", "prompts.count=3"])
    name, prompts, notes = prompts_for(cfg, build(PromptsConfig, cfg.prompts, "prompts"), tokenizer)
    assert name == "openbookqa" and len(prompts) == 3 and all(190 <= len(ids) <= 230 for ids in prompts)
    assert "190-230 tokens (Table 3)" in notes[0] and "corpus text" in notes[0]


def test_without_a_dataset_the_prompts_group_decides(tokenizer):
    cfg = compose_config(["experiment=ttft", "system=mnn", "prompts.prompt_tokens=40"])
    name, prompts, notes = prompts_for(cfg, build(PromptsConfig, cfg.prompts, "prompts"), tokenizer)
    assert name == cfg.prompts.name and [len(ids) for ids in prompts] == [40] * cfg.prompts.count and notes == []
