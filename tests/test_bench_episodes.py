"""`rlvr bench --vs episodes` on the tiny model: both sides sample at most the same policy tokens a row, the episode
side's turns end where the relay environment says, and the printout has both rows and the ratio."""

import argparse
import re

import torch

from conftest import make_tiny_llama
from rlvr.config import DEFAULTS
from rlvr.sampling import build_sampler
from rlvr.tasks import load_task
from rlvr_bench.episodes import _episodes, _single, run_vs_episodes


def test_both_sides_sample_at_most_the_same_policy_tokens(tokenizer):
    sampler = build_sampler(
        {**DEFAULTS["rollout"], "backend": "hf", "dtype": "float32"}, make_tiny_llama(len(tokenizer)), tokenizer
    )
    task = load_task("arithmetic", per_band=20)
    problems = task.problems("train")[:2]
    from rlvr.prompts.chat import encode_prompt

    ids = [encode_prompt(tokenizer, task.messages(p)) for p in problems]
    g = torch.Generator().manual_seed(0)
    single, _ = _single(sampler, ids, 2, 9, g)
    episode, _ = _episodes(sampler, tokenizer, task, problems, 2, 9, 3, g)
    assert 0 < single <= 2 * 2 * 9 and 0 < episode <= 2 * 2 * 9  # L = 9 tokens a row either way (3 turns of 3)


def test_the_printout_has_both_sides_and_the_ratio(model_dir, capsys):
    args = argparse.Namespace(
        model=str(model_dir),
        sampler="hf",
        dtype="float32",
        prompts=2,
        group=2,
        max_new_tokens=6,
        steps=1,
        warmup=0,
        seed=0,
        threads=1,
    )
    threads = torch.get_num_threads()
    assert run_vs_episodes(args) == 0
    assert torch.get_num_threads() == threads  # the process's own count back: later tests compute as before
    out = capsys.readouterr().out
    assert re.search(r"\| single-turn \| \d+ \|", out) and re.search(r"\| episode \(3 turns\) \| \d+ \|", out)
    assert re.search(r"episode / single-turn: \d+\.\d\d \(target >= 0\.70\)", out)
