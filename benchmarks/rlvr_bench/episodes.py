"""`rlvr bench --vs episodes`: an episode step's policy tokens/s beside a single-turn step's, on the same sampler
(rlvr's rollout backend), the same P prompts x G samples and the same policy-token length.

The single-turn side samples G completions of up to L tokens per prompt (one generate call). The episode side runs
G episodes per prompt of `--turns` K policy turns of up to L / K tokens each, an environment answering every turn
but the last with a short tool message (spliced in as ids, mask 0), so both sides sample at most L policy tokens a
row. What the episode side pays on top: the environment's ids, one prefill per turn of every episode's ids so far
(the first turn shared by a problem's G episodes), and rows waiting on the slowest in each turn. Sides alternate,
`--warmup` rounds first; the figure is policy tokens sampled per second of generation.
"""

from __future__ import annotations

import statistics
import time

import torch


class Relay:
    """K policy turns: every turn but the last gets a one-line tool message back; the last ends the episode."""

    tools: dict = {}

    def __init__(self, messages, turns: int):
        self.messages, self.turns, self.n = messages, turns, 0

    def reset(self, problem):
        self.n = 0
        return list(self.messages)

    def step(self, turn: str):
        from rlvr.environments.protocol import Step

        self.n += 1
        return Step([{"role": "tool", "content": f"ok {self.n}"}], done=self.n >= self.turns)


def _single(sampler, prompt_ids, G, L, generator) -> tuple[int, float]:
    t0 = time.perf_counter()
    ro = sampler.generate(prompt_ids, G, max_new_tokens=L, temperature=1.0, generator=generator)
    return int(ro.mask.sum()), time.perf_counter() - t0


def _episodes(sampler, tokenizer, task, problems, G, L, turns, generator) -> tuple[int, float]:
    from rlvr.environments.episode import run_episodes

    rows = [p for p in problems for _ in range(G)]
    envs = [Relay(task.messages(p), turns) for p in rows]
    t0 = time.perf_counter()
    eps = run_episodes(
        sampler,
        tokenizer,
        envs,
        rows,
        max_turns=turns,
        max_total_tokens=10**6,
        max_new_tokens=L // turns,
        temperature=1.0,
        generator=generator,
    )
    return sum(ep.policy_tokens for ep in eps), time.perf_counter() - t0


def run_vs_episodes(args, turns: int = 3) -> int:
    """The comparison at args' P, G, length and threads; prints the table and the ratio."""
    threads = torch.get_num_threads()
    torch.set_num_threads(args.threads)
    try:
        return _run(args, turns)
    finally:  # the caller's thread count back (a test process goes on with it)
        torch.set_num_threads(threads)


def _run(args, turns: int) -> int:
    from rlvr.config import DEFAULTS
    from rlvr.policy.load import load_policy
    from rlvr.prompts.chat import encode_prompt
    from rlvr.sampling import build_sampler
    from rlvr.tasks import load_task

    model, tokenizer = load_policy(args.model, "float32")
    rollout = {**DEFAULTS["rollout"], "backend": args.sampler, "dtype": args.dtype}
    sampler = build_sampler(rollout, model.eval(), tokenizer)
    task = load_task("arithmetic", per_band=50)
    problems = task.problems("train")[: args.prompts]
    prompt_ids = [encode_prompt(tokenizer, task.messages(p)) for p in problems]
    G, L = args.group, args.max_new_tokens
    generator = torch.Generator().manual_seed(args.seed)
    rates: dict[str, list[float]] = {"single-turn": [], f"episode ({turns} turns)": []}
    for i in range(args.warmup + args.steps):
        tok_s, sec_s = _single(sampler, prompt_ids, G, L, generator)
        tok_e, sec_e = _episodes(sampler, tokenizer, task, problems, G, L, turns, generator)
        if i >= args.warmup:
            rates["single-turn"].append(tok_s / sec_s)
            rates[f"episode ({turns} turns)"].append(tok_e / sec_e)
        print(
            f"round {i}{' (warm-up)' if i < args.warmup else ''}: single-turn {tok_s} tok in {sec_s:.2f} s, "
            f"episodes {tok_e} policy tok in {sec_e:.2f} s",
            flush=True,
        )
    print(
        f"\nrlvr bench --vs episodes: {args.model}, sampler {args.sampler} ({args.dtype}), P={args.prompts} G={G} L={L}, "
        f"{args.steps} rounds after {args.warmup} warm-up, {args.threads} threads"
    )
    print("| side | policy tok/s (median) | min | max |\n|---|---|---|---|")
    for side, r in rates.items():
        print(f"| {side} | {statistics.median(r):.0f} | {min(r):.0f} | {max(r):.0f} |")
    single, episode = (statistics.median(r) for r in rates.values())
    print(f"\nepisode / single-turn: {episode / single:.2f} (target >= 0.70)")
    return 0


__all__ = ["run_vs_episodes", "Relay"]
