"""What the supervised baseline (rlvr.training.sft) fine-tunes on: completions sampled from the starting model and
kept when the verifier says correct (rejection sampling), or a dataset's reference traces; at most sft.max_examples of
them; written to the run directory (kept.jsonl, kept_ids.jsonl, sft_data.json) so that a resume reads them back."""

from __future__ import annotations

import json
import math
import random
import time
from pathlib import Path

from tqdm.auto import tqdm

from rlvr.config import Config, ConfigError
from rlvr.environments.build import build_tools, episodes_of, episodic
from rlvr.environments.episode import replay_episode
from rlvr.environments.figures import transcript
from rlvr.prompts.chat import encode_prompt, prompt_format
from rlvr.rundir.files import atomic_write_text, read_config, read_jsonl
from rlvr.sampling import build_sampler, draw_settings
from rlvr.sampling.scored import draw_generator, sample_and_score
from rlvr.tasks.base import DatasetError
from rlvr.training.lifecycle import OpenedRun
from rlvr.training.reference_traces import written_for

# Sequences per sampler call: at most the RL step's P x G (the shape the run is sized for), and at most 32 for
# the HF sampler, which holds (rows, T, vocab) logits; the fast sampler decodes 64 rows ~30% faster than 32.
ROWS_PER_CALL = {"hf": 32}


def sample_budget(cfg: Config) -> int:
    """Completions to sample: sft.samples, else what sft.match_run generated, else the RL config's count."""
    s, r = cfg.sft, cfg.rollout
    if s.samples > 0:
        return s.samples
    if s.match_run:
        run = Path(s.match_run)
        rows = read_jsonl(run / "metrics.jsonl", skip_torn=True)
        if not rows:
            raise ConfigError(f"sft.match_run: {run} has no metrics.jsonl rows to match")
        g = read_config(run).rollout.group_size
        return int(sum(row.get("dynamic_sampling/generated_groups", r.prompts_per_step) for row in rows) * g)
    return cfg.train.steps * r.prompts_per_step * r.group_size


def _keep_correct(ro, owners, verdicts, ids, stats: dict, seen: set, kept: list) -> None:
    """Append to `kept` each verifier-correct, stop-terminated completion of the rollout not seen before for its
    problem (whitespace-normalised), counting the correct, truncated and duplicate ones in `stats`."""
    for row, (p, v) in enumerate(zip(owners, verdicts)):
        if v.status != "correct":
            continue
        stats["correct"] += 1
        if ro.finish[row] != "stop":
            stats["correct_truncated"] += 1
            continue
        key = (p.id, " ".join(ro.texts[row].split()))
        if key in seen:
            stats["duplicates"] += 1
            continue
        seen.add(key)
        length = int(ro.mask[row].sum())
        kept.append(
            {
                "problem_id": p.id,
                "band": p.band,
                "prompt": p.prompt,
                "prompt_ids": ids[int(ro.group_ids[row])],
                "completion_ids": ro.completion_ids[row, :length].tolist(),
                "completion": ro.texts[row],
                "extracted": v.extracted,
            }
        )


def collect_correct(
    sampler,
    tokenizer,
    task,
    reward,
    problems,
    *,
    budget: int,
    group_size: int,
    rollout,
    seed: int,
    progress=None,
    fmt: str = "chat",
) -> tuple[list[dict], dict]:
    """Sample `budget` completions (group_size per prompt, prompts in a seeded order, cycling if needed) and
    keep the verifier-correct, stop-terminated, distinct ones. Each call samples and scores as the RL round does
    (rlvr.sampling.scored.sample_and_score; round r draws with draw_generator(seed, r)). Returns (examples, stats);
    an example is {problem_id, band, prompt, prompt_ids, completion_ids, completion, extracted}. `fmt`: the prompt
    format, chat or plain (rlvr.prompts.chat.prompt_format)."""
    order = list(range(len(problems)))
    random.Random(f"{seed}-sft").shuffle(order)
    rows = rollout.prompts_per_step * rollout.group_size
    per_call = max(1, min(rows, ROWS_PER_CALL.get(rollout.backend, rows)) // group_size)
    kept, seen = list[dict](), set[tuple[str, str]]()
    stats = {"generated": 0, "correct": 0, "correct_truncated": 0, "duplicates": 0, "prompts": 0}
    position, n_round = 0, 0
    while stats["generated"] < budget:
        want = min(per_call, math.ceil((budget - stats["generated"]) / group_size))
        batch = [problems[order[(position + i) % len(order)]] for i in range(want)]
        position, n_round = position + want, n_round + 1
        ids = [encode_prompt(tokenizer, task.messages(p), fmt) for p in batch]
        generator = draw_generator(seed, n_round)
        scored = sample_and_score(
            sampler, batch, ids, group_size, reward, **draw_settings(rollout), generator=generator
        )
        owners = scored.problems
        _keep_correct(scored.rollouts, owners, scored.result.verdicts, ids, stats, seen, kept)
        stats["generated"] += len(owners)
        stats["prompts"] += len(batch)
        if progress is not None:
            progress.update(len(owners))
            progress.set_postfix({"correct": f"{stats['correct'] / stats['generated']:.3f}", "kept": len(kept)})
    stats["kept"], stats["problems_kept"] = len(kept), len({e["problem_id"] for e in kept})
    return kept, stats


def reference_examples(
    tokenizer, task, problems, field: str, tools: dict | None = None, traces: dict | None = None, fmt: str = "chat"
) -> list[dict]:
    """The dataset's own worked solutions (problem.meta[field]), or `traces` ({problem id: trace}, written by
    sft.reference: rlvr.training.reference_traces), as completions: a text ends in the stop token; a list of chat
    messages (a tool-use trace: the assistant's turns and the tools' answers) becomes the ids an episode would have
    sampled, the tools' ids masked out (completion_mask), its opening showing `tools` as episodes do; a text's prompt
    in format `fmt` (chat or plain)."""
    out = []
    for p in problems:
        if traces is not None:
            trace = traces.get(p.id)
        else:
            trace = p.meta.get(field) if isinstance(p.meta, dict) else None
        if not trace:
            continue
        if isinstance(trace, list):
            ep = replay_episode(tokenizer, task.messages(p), trace, tools or {})
            prompt_ids, ids, mask, text = ep.prompt_ids, ep.ids, ep.mask, transcript(ep)
        else:
            prompt_ids, text = encode_prompt(tokenizer, task.messages(p), fmt), str(trace)
            ids = tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
            mask = [1.0] * len(ids)
        out.append(
            {
                "problem_id": p.id,
                "band": p.band,
                "prompt": p.prompt,
                "prompt_ids": prompt_ids,
                "completion_ids": ids,
                "completion_mask": mask,
                "completion": text,
                "extracted": None,
            }
        )
    if not out and traces is not None:
        raise DatasetError("sft.reference: no written trace grades correct under the task's verifier")
    if not out:
        raise DatasetError(f"sft.source=reference: no training problem has a {field!r} column")
    return out


def take_examples(examples: list[dict], limit: int, seed: int) -> list[dict]:
    """At most `limit` of the examples (0 = all): a seeded choice kept in the data's order, so the bands stay as
    mixed as they are in the data. The reference traces of a large task cost more fine-tuning than a baseline needs."""
    if not limit or len(examples) <= limit:
        return examples
    chosen = sorted(random.Random(f"{seed}-sft-examples").sample(range(len(examples)), limit))
    return [examples[i] for i in chosen]


def kept_examples(
    opened: OpenedRun, c: Config, model, tokenizer, task, reward, problems, budget: int, quiet: bool, written=None
):
    """(examples, stats): the completions to fine-tune on, sampled and kept (or the dataset's traces, or `written`:
    sft.reference's (traces, stats) when already made), written to kept.jsonl (readable) and kept_ids.jsonl (with
    token ids); a resumed run reads them back instead."""
    ids_path = opened.path / "kept_ids.jsonl"
    if opened.resume_from is not None and ids_path.exists():
        examples = read_jsonl(ids_path)
        return examples, json.loads((opened.path / "sft_data.json").read_text())
    t0 = time.perf_counter()
    fmt = prompt_format(c.model.prompt_format, tokenizer, c.model.name, episodes_of(c.episode))
    if c.sft.source == "reference":
        tools = build_tools(c.episode) if episodic(c.episode) else {}
        # traces written by the user's function (sft.reference), played through the run's own environment
        traces, stats = written if written is not None else (written_for(c, task, reward, problems) or (None, {}))
        examples = reference_examples(tokenizer, task, problems, c.sft.reference_field, tools, traces, fmt)
    else:
        sampler = build_sampler(c.rollout, model.eval(), tokenizer, prompt_format=fmt)
        with tqdm(total=budget, desc="rlvr sft: sampling", unit="completion", disable=quiet) as bar:
            examples, stats = collect_correct(
                sampler,
                tokenizer,
                task,
                reward,
                problems,
                budget=budget,
                group_size=c.sft.group_size or c.rollout.group_size,
                rollout=c.rollout,
                seed=c.seed,
                progress=bar,
                fmt=fmt,
            )
        del sampler
    available = len(examples)
    examples = take_examples(examples, c.sft.max_examples, c.seed)
    stats.update(
        {
            "source": c.sft.source,
            "budget_completions": budget,
            "examples_available": available,
            "examples": len(examples),
            "time/collect": time.perf_counter() - t0,
        }
    )
    readable = [{k: v for k, v in e.items() if not k.endswith(("_ids", "_mask"))} for e in examples]
    atomic_write_text(opened.path / "kept.jsonl", "".join(json.dumps(e) + "\n" for e in readable))
    atomic_write_text(opened.path / "sft_data.json", json.dumps(stats, indent=2) + "\n")
    atomic_write_text(ids_path, "".join(json.dumps(e) + "\n" for e in examples))  # last: its presence marks done
    return examples, stats


__all__ = ["sample_budget", "collect_correct", "reference_examples", "take_examples", "kept_examples"]
