"""What a distillation teacher's scoring costs, and what a lighter teacher would save (issue 73, item 2).

    python benchmarks/teacher_cost.py --teacher MODEL --student MODEL --records RUN/eval/start/records.jsonl \
        --data docs/examples/multi_step/heldout.jsonl [--rows 32] [--variants float32,int8]

The rows are real: the student's own completions from an `rlvr eval` of it (records.jsonl: the start model's greedy
chains of thought), each behind the prompt the task gives its problem (the jsonl task with no demonstration, the
model's chat template), as one training step's batch would carry them. Each variant of the teacher scores the same
rows with rlvr's own scoring (rlvr.policy.update.scored_logprobs: each prompt once, micro-batches by length), timed
after one warm-up call; the student scores them too, for the share a teacher adds beside the update's own forward.

Variants: float32 (what `distill.teacher` loads today on a CPU without bf16); bfloat16 (autocast, where the CPU has
it); int8 (torch's dynamic int8 quantisation of every Linear but the head, fbgemm/x86 kernels: weights int8,
activations quantised per call). For each: seconds, tokens/s, and its mismatch against float32 on the completion
tokens (mean |d logp| and the mean per-token KL of the sampled token's log-ratio, float32 minus variant). It measures;
it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from dataclasses import replace

import torch

from rlvr.algorithms.step_batch import StepBatch
from rlvr.evaluation.records import read_records
from rlvr.policy.load import load_policy
from rlvr.policy.update import UpdateSettings, scored_logprobs
from rlvr.prompts.chat import encode_prompt
from rlvr.tasks import load_task
from rlvr.training.batch import select_rows
from rlvr.verifiers.base import Verdict


def rows_from_records(path: str, data: str, tokenizer, n: int, bands: list[str]) -> StepBatch:
    """n greedy completions from the records (the given bands first, in order), as a StepBatch to score."""
    task = load_task("jsonl", splits={"train": data, "heldout": data}, demo="none")
    problems = {p.id: p for p in task.problems("heldout")}
    recs = [r for r in read_records(path) if r.mode == "greedy" and r.problem_id in problems]
    recs.sort(key=lambda r: (bands.index(r.band) if r.band in bands else len(bands), r.problem_id))
    recs = recs[:n]
    prompts = [encode_prompt(tokenizer, task.messages(problems[r.problem_id])) for r in recs]
    comps = [tokenizer(r.completion, add_special_tokens=False)["input_ids"] for r in recs]
    width = max(len(c) for c in comps)
    ids = torch.full((len(recs), width), tokenizer.pad_token_id or 0, dtype=torch.long)
    mask = torch.zeros(len(recs), width)
    for i, c in enumerate(comps):
        ids[i, : len(c)], mask[i, : len(c)] = torch.tensor(c), 1.0
    return StepBatch(
        problems=[problems[r.problem_id] for r in recs],
        prompt_ids=prompts,
        completion_ids=ids,
        mask=mask,
        sampler_logp=torch.zeros(len(recs), width),
        group_ids=torch.arange(len(recs)),
        lengths=torch.tensor([len(c) for c in comps]),
        finish=["stop"] * len(recs),
        texts=[r.completion for r in recs],
        verdicts=[Verdict(r.status, r.reward) for r in recs],
        rewards=torch.tensor([r.reward for r in recs]),
        terms={},
    )


def int8(model):
    """Every Linear but the head as torch's dynamic int8 (the head's log-probs stay float32)."""
    from torch.ao.quantization import quantize_dynamic

    head = model.get_output_embeddings()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao.quantization's deprecation notice, once per layer
        for name, child in list(model.named_children()):
            if child is not head:
                setattr(model, name, quantize_dynamic(child, {torch.nn.Linear}, dtype=torch.qint8))
    return model


def timed(model, batch: StepBatch, s: UpdateSettings) -> tuple[torch.Tensor, float]:
    with torch.inference_mode():
        scored_logprobs(model, select_rows(batch, [0, 1]), s)  # warm-up: first-call allocations, kernel choices
        t0 = time.perf_counter()
        out = scored_logprobs(model, batch, s)
    return out, time.perf_counter() - t0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--teacher", required=True)
    p.add_argument("--student", required=True)
    p.add_argument("--records", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--rows", type=int, default=32)
    p.add_argument("--bands", default="5-step,4-step,3-step,2-step")
    p.add_argument("--variants", default="float32,int8")
    p.add_argument("--micro-batch-tokens", type=int, default=4096)
    p.add_argument("--json")
    a = p.parse_args()
    student, tokenizer = load_policy(a.student, "float32")
    batch = rows_from_records(a.records, a.data, tokenizer, a.rows, a.bands.split(","))
    tokens = int(batch.mask.sum())
    prompt_tokens = sum(len(x) for x in batch.prompt_ids)
    s = UpdateSettings(pad_id=tokenizer.pad_token_id or 0, micro_batch_tokens=a.micro_batch_tokens)
    _, student_s = timed(student, batch, s)
    del student
    out = {"rows": len(batch), "completion_tokens": tokens, "prompt_tokens": prompt_tokens, "student_s": student_s}
    print(f"{len(batch)} rows, {tokens} completion + {prompt_tokens} prompt tokens; student forward {student_s:.1f} s")
    ref = None
    for v in a.variants.split(","):
        model, _ = load_policy(a.teacher, "float32")
        model.eval().requires_grad_(False)
        if v == "int8":
            model = int8(model)
        vs = replace(s, autocast="bfloat16" if v == "bfloat16" else "none")
        logp, sec = timed(model, batch, vs)
        row = {"seconds": sec, "tokens_per_s": tokens / sec}
        if ref is None:
            ref = logp
        else:
            m = batch.mask > 0
            row["mean_abs_dlogp"] = float((logp - ref)[m].abs().mean())
            row["mean_log_ratio"] = float((ref - logp)[m].mean())
        out[v] = row
        print(v, json.dumps(row))
        del model
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(out, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
