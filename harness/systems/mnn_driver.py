"""Runs in the measured process for the MNN system: load an exported model with MNN.llm, tokenize the prompt text with
MNN's own tokenizer, prefill, print the first token. Imports nothing from the harness, so the process's startup is
Python + MNN only.

Usage: python -I mnn_driver.py CONFIG_JSON THREADS PROMPT_FILE [GEN_TOKENS]   (PROMPT_FILE: the prompt as UTF-8 text)
Prints `first_token <id>` as soon as it is known, then one JSON line of timings measured in this process (seconds
from its start) and MNN's own load time (`load_us` of the Llm context). The first token is the argmax of the logits
of `Llm.forward(ids)` (MNN's prefill returns the last position's logits, shape [1, 1, vocab]): in mnn 3.6.1,
`Llm.generate(ids)` with max_new_tokens=1 prefills but returns no token.
With GEN_TOKENS > 1 it then decodes greedily, one `Llm.forward([token])` per step (the Llm keeps its KV cache; its
last logits match a full forward of the extended sequence), and reports the decode time of GEN_TOKENS - 1 steps.
"""
import json
import sys
import time

t_start = time.monotonic()
import MNN.llm as mnn_llm  # noqa: E402

t_import = time.monotonic()


def main(config: str, threads: int, prompt_file: str, gen_tokens: int = 1) -> None:
    with open(prompt_file, encoding="utf-8") as f:
        text = f.read()
    llm = mnn_llm.create(config)
    llm.set_config({"thread_num": threads})
    llm.load()
    t_load = time.monotonic()
    ids = [int(t) for t in llm.tokenizer_encode(text)]  # inside the clock, as llama.cpp and EdgeFlow tokenize
    t_tokenized = time.monotonic()
    logits = llm.forward(ids).read()  # numpy array [1, 1, vocab]
    first = int(logits.reshape(-1, logits.shape[-1])[-1].argmax())
    t_first = time.monotonic()
    print(f"first_token {first}", flush=True)
    t_decode0 = time.monotonic()
    token = first
    for _ in range(gen_tokens - 1):
        logits = llm.forward([token]).read()
        token = int(logits.reshape(-1, logits.shape[-1])[-1].argmax())
    t_decoded = time.monotonic()
    load_us = llm.context.load_us
    print(json.dumps({"import_s": t_import - t_start, "load_s": t_load - t_import,
                      "tokenize_s": t_tokenized - t_load, "prefill_s": t_first - t_tokenized,
                      "mnn_load_us": load_us, "prompt_tokens": len(ids), "prompt_ids": ids,
                      "decode_steps": gen_tokens - 1, "decode_s": t_decoded - t_decode0}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 1)
