"""CTranslate2 (`rlvr bench --vs ct2`): its `Generator` on the CPU, the model converted by its own converter.

The worker converts rlvr's safetensors folder with `ctranslate2.converters.TransformersConverter` (the class
behind `ct2-transformers-converter`, run in this process, so `convert_s` has no interpreter start-up in it) with
the weights quantized at conversion (`quantization=` the precision), loads the result with the same
`compute_type`, and samples each batch in one `generate_batch` call: the P prompts as token strings (CTranslate2's
Python API takes no ids here), `num_hypotheses=G` (one prefill a prompt, then G rows; faster here than repeating
each prompt G times), full-vocabulary sampling (`sampling_topk=0`), the stop ids as `end_token` with
`return_end_token=True` (so the stop token is in the row and counted), `max_length` = max new tokens (the prompt
is not counted: `include_prompt_in_result=False`). CTranslate2 4.8.5 computes no bf16 on a CPU without AMX
(`get_supported_compute_types("cpu")` here: float32, int8, int8_float32), so its row closest to rlvr's bf16 is
float32, then int8 weights.
"""

from __future__ import annotations

import sys
from pathlib import Path

from rlvr_bench.engines import replace_model, serve, timed
from rlvr_bench.rollouts import step_result

PACKAGES = {"ctranslate2": "ctranslate2", "transformers": "transformers", "torch": "torch"}
RECIPE = (
    "python3 -m venv ct2-venv && ct2-venv/bin/pip install torch==2.13.0 && "
    "ct2-venv/bin/pip install ctranslate2==4.8.5 transformers"
)
# compute types CTranslate2 supports on this CPU; float32 first (no bf16 compute without AMX), then int8 weights
PRECISIONS = ("float32", "int8")
LOGPROBS = (
    "yes: return_scores gives each row's mean sampled-token log-prob (stop token included); "
    "times the row's length it is the sum"
)


def seed_for(spec: dict, step: int) -> int:
    """The seed of a batch, as rlvr's sampler seeds it (CTranslate2 takes one global seed a call)."""
    return spec["seed"] * 1_000_003 + step


def generate_kwargs(spec: dict) -> dict:
    """`Generator.generate_batch`'s options for the bench shape: G samples a prompt from the full vocabulary at the
    spec's temperature, stopping at a stop id (kept in the row) or after max_new_tokens."""
    return {
        "num_hypotheses": spec["group"],
        "max_length": spec["max_new_tokens"],
        "sampling_topk": spec["top_k"] or 0,  # 0: sample from the whole vocabulary
        "sampling_topp": spec["top_p"],
        "sampling_temperature": spec["temperature"],
        "include_prompt_in_result": False,
        "end_token": list(spec["stop_ids"]),
        "return_end_token": True,
        "return_scores": True,
        "beam_size": 1,
    }


def figures(rows: list[tuple[list[int], float]], stop_ids, threads: int) -> dict:
    """A batch's step figures from CTranslate2's rows as (token ids, score): a row stopped when its last token is a
    stop id; a score is the row's mean log-prob (length penalty 1 divides the sum by the length), so the
    batch's mean log-prob is sum(score x length) / sum(length)."""
    stops = set(stop_ids)
    lengths = [len(ids) for ids, _ in rows]
    stopped = sum(1 for ids, _ in rows if ids and ids[-1] in stops)
    total = sum(lengths)
    logp = sum(score * len(ids) for ids, score in rows) / total if total else None
    return step_result(lengths, stopped, threads, logp)


def run_worker(spec: dict) -> None:
    """Child, under the CTranslate2 venv: convert, load, then serve batches and syncs."""
    import ctranslate2
    import torch
    import transformers
    from ctranslate2.converters import TransformersConverter
    from transformers import AutoTokenizer

    precision, threads = spec["precision"], spec["threads"]
    work = Path(spec["work_dir"])
    work.mkdir(parents=True, exist_ok=True)
    tokenizer = AutoTokenizer.from_pretrained(spec["model"])
    state = {"version": 0, "model": None, "dir": None}

    def convert() -> tuple[Path, float]:
        out = work / f"model-{state['version']}"
        state["version"] += 1
        _, seconds = timed(TransformersConverter(spec["model"]).convert, str(out), quantization=precision, force=True)
        return out, seconds

    def load(path: Path) -> float:
        return replace_model(
            state,
            lambda p: ctranslate2.Generator(
                str(p), device="cpu", compute_type=precision, intra_threads=threads, inter_threads=1
            ),
            path,
            unload=lambda g: g.unload_model(),
        )

    path, convert_s = convert()
    load_s = load(path)
    kwargs = generate_kwargs(spec)

    def generate(step: int, prompts: list[list[int]]) -> dict:
        ctranslate2.set_random_seed(seed_for(spec, step))
        results = state["model"].generate_batch([tokenizer.convert_ids_to_tokens(p) for p in prompts], **kwargs)
        return figures(
            [(ids, score) for r in results for ids, score in zip(r.sequences_ids, r.scores)], spec["stop_ids"], threads
        )

    def sync() -> dict:
        new, c = convert()
        return {"convert_s": c, "load_s": load(new)}

    print(
        f"ctranslate2 {ctranslate2.__version__}: {precision} from {spec['model']} in {convert_s:.1f} s, "
        f"loaded in {load_s:.1f} s",
        file=sys.stderr,
        flush=True,
    )
    serve(
        spec,
        generate,
        sync,
        {
            "convert_s": convert_s,
            "load_s": load_s,
            "precision": precision,
            "logprobs": LOGPROBS,
            "versions": {
                "ctranslate2": ctranslate2.__version__,
                "transformers": transformers.__version__,
                "torch": torch.__version__,
            },
        },
    )


__all__ = ["PACKAGES", "RECIPE", "PRECISIONS", "LOGPROBS", "run_worker", "figures", "generate_kwargs", "seed_for"]
