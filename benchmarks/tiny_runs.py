"""A fixed-seed 3-step run of each algorithm preset on each local sampler, on a tiny random Llama with the default
model's real tokenizer: the before/after check of a change that must not move any number (with same_run.py).

    python benchmarks/tiny_runs.py OUT_BEFORE          # on the commit before
    python benchmarks/tiny_runs.py OUT_AFTER           # on the commit after
    for r in OUT_AFTER/*/; do python benchmarks/same_run.py OUT_BEFORE/$(basename $r) $r --new mismatch/; done

Minutes on 2 CPU cores; it asserts nothing.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def tiny_llama(vocab_size: int):
    """The tests' tiny model (tests/conftest.py): 2 layers, hidden 32, seeded."""
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig

    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=2,
    )
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(config, dtype=torch.float32)


def main(root: Path) -> None:
    from transformers import AutoTokenizer

    from rlvr.config import resolve
    from rlvr.policy.load import DEFAULT_MODEL, embedded_gguf
    from rlvr.training.loop import train

    gguf = embedded_gguf(DEFAULT_MODEL)
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    tok.pad_token = tok.pad_token or tok.eos_token
    root.mkdir(parents=True, exist_ok=True)
    data = root / "data.jsonl"
    data.write_text(
        "".join(
            json.dumps(
                {
                    "id": f"q{i}",
                    "prompt": f"Say something about {i}.",
                    "answer": "[a-m]",
                    "band": ["easy", "hard"][i % 2],
                }
            )
            + "\n"
            for i in range(60)
        )
    )
    for preset in ("grpo", "dapo", "gspo", "dr_grpo"):
        for backend in ("hf", "fast"):
            sets = [
                f"output_dir={root / f'{preset}-{backend}'}",
                "task.name=jsonl",
                f"task.settings={{path: {data}}}",
                'reward.terms=[{name: first_char, kind: regex, weight: 1.0, pattern: "^\\\\s*(\\\\S)", '
                "gold_is_pattern: true}]",
                "reward.workers=0",
                "rollout.prompts_per_step=2",
                "rollout.group_size=4",
                "rollout.max_new_tokens=8",
                "train.steps=3",
                "train.lr=0.05",
                "train.micro_batch_size=4",
                "log.samples_every=1",
                "log.checkpoint_every=3",
                "model.lora.r=4",
                f"algorithm={{preset: {preset}}}",
                f"rollout.backend={backend}",
            ]
            train(resolve(None, sets), policy=(tiny_llama(len(tok)), tok), quiet=True)
            print(f"{preset}-{backend} done", flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
