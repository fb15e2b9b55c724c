"""python -m harness.data: fetch and clean the corpus, generate the local tasks, print what was made (JSON)."""
from __future__ import annotations

import argparse
import json

from harness.data.config import load_dataset_config
from harness.registry import conf_group
from harness.data.corpus import corpus_dir, load_corpus
from harness.data.tasks import write_local_tasks


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.parse_args(argv)
    corpus = load_corpus()
    summary = {"corpus": str(corpus_dir()), "content_sha256": corpus.content_sha256,
               "splits": {name: {"works": len(works), "words": sum(len(w.text.split()) for w in works)}
                          for name in corpus.splits for works in [corpus.split(name)]},
               "local_tasks": {}}
    for path in sorted(conf_group("dataset").glob("*.yaml")):
        cfg = load_dataset_config(path.stem)
        if cfg.local_task:
            summary["local_tasks"][cfg.name] = str(write_local_tasks(corpus, cfg.seed, cfg.local_items))
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
