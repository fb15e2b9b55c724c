"""Seeded local accuracy tasks built from the corpus's `tasks` split, written as lm-eval custom tasks.

Both are proxies for the paper's datasets, not copies: they test the same ability on Shakespeare's text, and every
result built on them is labelled `PROXY_LABEL`.

`lambada-local` (LAMBADA-style, `loglikelihood`, metrics acc and perplexity): a passage of whole sentences
ending in a word; the model must predict that last word. LAMBADA keeps passages whose last word humans guess from
the whole passage but not from the last sentence alone; the cheap stand-ins used here are:
  - the target ends its sentence (".", "!" or "?" right after it, stripped from the passage, as LAMBADA does);
  - it is a content word: letters only, at least 3 of them, not in `STOPWORDS`;
  - it already occurs earlier in the passage (case-insensitive), so the context can point at it;
  - the passage has `LAMBADA_WORDS` words of context (sentences are added backwards until the minimum is met).

`hellaswag-local` (HellaSwag-style, `multiple_choice`, metrics acc and acc_norm): a context of whole sentences and
four endings: the sentence that really follows (in the same speech or stanza) and three distractors. Distractors are
sentences from *other works* of the same split whose length in words is within `DISTRACTOR_LENGTH_SLACK` of the true
ending's (so length alone gives nothing away), drawn with the task's seeded RNG; the four are shuffled by the same
RNG. HellaSwag's distractors are adversarially filtered machine text, so this proxy is easier than the real one.

Items never share a sentence (spans are chosen greedily in seeded order), and everything is a pure function of the
corpus's content hash, the task name, the seed and the item count: the same inputs give byte-identical files.
"""
from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from harness.cache import atomic_directory, cache_dir
from harness.data.corpus import Corpus, Work

PROXY_LABEL = "proxy (local, Shakespeare corpus)"
GENERATOR_VERSION = 1  # bump when generation changes: cached task files are keyed by it
LOCAL_TASKS = ("lambada-local", "hellaswag-local")
LAMBADA_WORDS = (40, 120)  # context words: at least, at most
HELLASWAG_CONTEXT_WORDS = (15, 80)
HELLASWAG_ENDING_WORDS = (6, 30)
DISTRACTOR_LENGTH_SLACK = 0.25  # a distractor's word count is within +-25% (at least +-2 words) of the true ending's
N_CHOICES = 4
STOPWORDS = frozenset("""
a about after again against all am an and any are as at be because been before being below between both but by
can could did do does doing down during each few for from further had has have having he her here hers herself him
himself his how i if in into is it its itself just me more most my myself no nor not now of off on once only or other
our ours ourselves out over own same she should so some such than that the their theirs them themselves then there
these they this those through to too under until up upon very was we were what when where which while who whom why
will with would you your yours yourself yourselves thee thou thy thine ye hath doth art shall shalt wilt dost hast
let may might must o oh ay yea nay sir lord good well come go say said make made know one yet
""".split())

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z'\"(])")
_WORD = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)*")
_LAST_WORD = re.compile(r"^(?P<context>.*\S)\s+(?P<target>[A-Za-z]{3,})[.!?]$", re.S)


@dataclass(frozen=True)
class Sentence:
    text: str
    paragraph: int  # index of its paragraph in the work
    n_words: int


def sentences(work: Work) -> list[Sentence]:
    """The work's sentences in order; a sentence never spans two paragraphs (two speeches or stanzas)."""
    out = []
    for p, para in enumerate(work.paragraphs):
        for text in _SENTENCE_END.split(para):
            if text.strip():
                out.append(Sentence(text.strip(), p, len(text.split())))
    return out


# --- generation -----------------------------------------------------------------------------------------------

def lambada_items(works: tuple[Work, ...], n: int, seed: int) -> list[dict]:
    candidates = []  # (work index, first sentence, last sentence, item)
    for w, work in enumerate(works):
        sents = sentences(work)
        for i, s in enumerate(sents):
            m = _LAST_WORD.match(s.text)
            if not m or m.group("target").lower() in STOPWORDS:
                continue
            j, words = i, len(m.group("context").split())
            while words < LAMBADA_WORDS[0] and j > 0:
                j -= 1
                words += sents[j].n_words
            if not LAMBADA_WORDS[0] <= words <= LAMBADA_WORDS[1]:
                continue
            context = " ".join([t.text for t in sents[j:i]] + [m.group("context")])
            target = m.group("target")
            if target.lower() not in {x.lower() for x in _WORD.findall(context)}:
                continue
            candidates.append((w, j, i, {"context": context, "target": target, "work": work.name}))
    return _pick_disjoint(candidates, n, random.Random(f"lambada-local:{seed}"), "lambada-local")


def hellaswag_items(works: tuple[Work, ...], n: int, seed: int) -> list[dict]:
    rng = random.Random(f"hellaswag-local:{seed}")
    per_work = [sentences(work) for work in works]
    by_length: dict[int, list[tuple[int, str]]] = {}  # word count -> (work index, sentence) for distractors
    for w, sents in enumerate(per_work):
        for s in sents:
            if HELLASWAG_ENDING_WORDS[0] <= s.n_words <= HELLASWAG_ENDING_WORDS[1]:
                by_length.setdefault(s.n_words, []).append((w, s.text))
    candidates = []
    for w, sents in enumerate(per_work):
        for i in range(1, len(sents)):
            ending = sents[i]
            if ending.paragraph != sents[i - 1].paragraph:
                continue  # the true ending continues the same speech
            if not HELLASWAG_ENDING_WORDS[0] <= ending.n_words <= HELLASWAG_ENDING_WORDS[1]:
                continue
            j, words = i - 1, sents[i - 1].n_words
            while words < HELLASWAG_CONTEXT_WORDS[0] and j > 0:
                j -= 1
                words += sents[j].n_words
            if not HELLASWAG_CONTEXT_WORDS[0] <= words <= HELLASWAG_CONTEXT_WORDS[1]:
                continue
            context = " ".join(t.text for t in sents[j:i])
            candidates.append((w, j, i, {"context": context, "ending": ending.text, "work": works[w].name}))
    picked = _pick_disjoint(candidates, n, rng, "hellaswag-local")
    return [_with_distractors(item, by_length, works, rng) for item in picked]


def _with_distractors(item: dict, by_length: dict, works: tuple[Work, ...], rng: random.Random) -> dict:
    n_words = len(item["ending"].split())
    slack = max(2, round(DISTRACTOR_LENGTH_SLACK * n_words))
    lengths = range(n_words - slack, n_words + slack + 1)
    pool = sorted({text for length in lengths for w, text in by_length.get(length, ())
                   if works[w].name != item["work"] and text != item["ending"]})
    if len(pool) < N_CHOICES - 1:
        raise ValueError(f"hellaswag-local: only {len(pool)} distractors of ~{n_words} words in the tasks split")
    choices = rng.sample(pool, N_CHOICES - 1) + [item["ending"]]
    rng.shuffle(choices)
    return {"query": item["context"], "choices": choices, "label": choices.index(item["ending"]), "work": item["work"],
            "id": item["id"]}


def _pick_disjoint(candidates: list, n: int, rng: random.Random, task: str) -> list[dict]:
    """n candidates in seeded order, skipping any that shares a sentence with one already taken."""
    order = list(range(len(candidates)))
    rng.shuffle(order)
    taken: dict[int, list[tuple[int, int]]] = {}  # work index -> taken sentence spans
    items = []
    for k in order:
        w, first, last, item = candidates[k]
        if any(first <= b and a <= last for a, b in taken.get(w, ())):
            continue
        taken.setdefault(w, []).append((first, last))
        items.append(item)
        if len(items) == n:
            return [dict(item, id=f"{task}-{i}") for i, item in enumerate(items)]
    raise ValueError(f"{task}: the tasks split yields only {len(items)} disjoint items, {n} were asked for")


# --- lm-eval task files ---------------------------------------------------------------------------------------

_GENERATORS = {"lambada-local": lambada_items, "hellaswag-local": hellaswag_items}


def _lm_eval_config(task: str, data_file: Path, corpus_sha256: str, seed: int) -> dict:
    common = {"task": task, "dataset_path": "json", "dataset_kwargs": {"data_files": {"test": str(data_file)}},
              "test_split": "test",
              "metadata": {"version": GENERATOR_VERSION, "protocol": PROXY_LABEL, "corpus_sha256": corpus_sha256,
                           "seed": seed}}
    if task == "lambada-local":  # as lm-eval's lambada_openai: the target is the last word with its leading space
        return {**common, "output_type": "loglikelihood", "doc_to_text": "{{context}}",
                "doc_to_target": "{{' ' + target}}",
                "metric_list": [{"metric": "perplexity", "aggregation": "perplexity", "higher_is_better": False},
                                {"metric": "acc", "aggregation": "mean", "higher_is_better": True}]}
    return {**common, "output_type": "multiple_choice", "doc_to_text": "{{query}}", "doc_to_target": "{{label}}",
            "doc_to_choice": "choices",
            "metric_list": [{"metric": "acc", "aggregation": "mean", "higher_is_better": True},
                            {"metric": "acc_norm", "aggregation": "mean", "higher_is_better": True}]}


def task_dir(corpus: Corpus, seed: int, n_items: int) -> Path:
    return cache_dir("data", "tasks") / f"{corpus.content_sha256[:12]}-v{GENERATOR_VERSION}-seed{seed}-n{n_items}"


def write_local_tasks(corpus: Corpus, seed: int, n_items: int, out: Path | None = None) -> Path:
    """JSONL data and lm-eval YAML for every local task, in a directory for `TaskManager(include_path=...)`.

    Written once per (corpus, seed, n_items) into a temporary directory renamed into place, so an interrupted run
    never leaves a directory that looks complete.
    """
    out = out or task_dir(corpus, seed, n_items)
    if all((out / f"{t}.yaml").is_file() for t in LOCAL_TASKS):
        return out
    works = corpus.split("tasks")
    with atomic_directory(out) as tmp:
        for task in LOCAL_TASKS:
            items = _GENERATORS[task](works, n_items, seed)
            lines = "".join(json.dumps(item, sort_keys=True) + "\n" for item in items)
            (tmp / f"{task}.jsonl").write_text(lines)
            config = _lm_eval_config(task, out / f"{task}.jsonl", corpus.content_sha256, seed)
            (tmp / f"{task}.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return out
