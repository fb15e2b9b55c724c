import json
import re

import pytest
import yaml

from harness.data.tasks import (DISTRACTOR_LENGTH_SLACK, LAMBADA_WORDS, LOCAL_TASKS, PROXY_LABEL, STOPWORDS,
                                hellaswag_items, lambada_items, write_local_tasks)

N = 25


def _files(directory):
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.suffix == ".jsonl"}


def test_same_seed_gives_identical_files_and_another_seed_differs(corpus, tmp_path):
    a = write_local_tasks(corpus, seed=7, n_items=N, out=tmp_path / "a")
    b = write_local_tasks(corpus, seed=7, n_items=N, out=tmp_path / "b")
    c = write_local_tasks(corpus, seed=8, n_items=N, out=tmp_path / "c")
    assert _files(a) == _files(b) and set(_files(a)) == {f"{t}.jsonl" for t in LOCAL_TASKS}
    for name in _files(a):
        assert _files(a)[name] != _files(c)[name]


def test_lambada_items_end_in_a_content_word_seen_in_the_passage(corpus):
    works = corpus.split("tasks")
    items = lambada_items(works, N, seed=0)
    assert len({item["context"] for item in items}) == N
    for item in items:
        target, context = item["target"], item["context"]
        assert re.fullmatch(r"[A-Za-z]{3,}", target) and target.lower() not in STOPWORDS
        assert target.lower() in context.lower().split() or target.lower() in re.findall(r"[a-z]+", context.lower())
        assert LAMBADA_WORDS[0] <= len(context.split()) <= LAMBADA_WORDS[1]
        work = next(w for w in works if w.name == item["work"])
        assert f"{context} {target}" in " ".join(work.paragraphs)  # the passage is real corpus text


def test_hellaswag_items_have_the_true_ending_and_length_matched_foreign_distractors(corpus):
    works = {w.name: " ".join(w.paragraphs) for w in corpus.split("tasks")}
    for item in hellaswag_items(corpus.split("tasks"), N, seed=0):
        choices, label = item["choices"], item["label"]
        assert len(set(choices)) == 4 and 0 <= label < 4
        assert f"{item['query']} {choices[label]}" in works[item["work"]]
        true_len = len(choices[label].split())
        for k, distractor in enumerate(choices):
            if k != label:
                assert distractor not in works[item["work"]]
                assert abs(len(distractor.split()) - true_len) <= max(2, round(DISTRACTOR_LENGTH_SLACK * true_len))


def test_labels_are_spread_over_the_four_positions(corpus):
    labels = [item["label"] for item in hellaswag_items(corpus.split("tasks"), 40, seed=0)]
    assert len(set(labels)) == 4


def test_asking_for_more_items_than_the_split_holds_says_so(corpus):
    with pytest.raises(ValueError, match="lambada-local: the tasks split yields only"):
        lambada_items(corpus.split("tasks"), 100_000, seed=0)


def test_yaml_points_lm_eval_at_the_generated_data(corpus, tmp_path):
    out = write_local_tasks(corpus, seed=3, n_items=N, out=tmp_path / "t")
    for task in LOCAL_TASKS:
        config = yaml.safe_load((out / f"{task}.yaml").read_text())
        assert config["task"] == task and config["dataset_path"] == "json"
        data = config["dataset_kwargs"]["data_files"]["test"]
        assert len(open(data).read().splitlines()) == N
        assert config["metadata"]["protocol"] == PROXY_LABEL
        assert config["metadata"]["corpus_sha256"] == corpus.content_sha256
        assert json.loads(open(data).readline())["id"] == f"{task}-0"
