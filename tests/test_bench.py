"""`rlvr bench`: the verb parses, the FLOP and rate arithmetic is right by hand, and the rlvr side runs one
real step on the tiny random model and prints the table (the TRL side too, where TRL is importable)."""

import argparse
import importlib.util

import pytest
import torch

from conftest import save_tiny_model
from rlvr_bench import bench


def parse(argv):
    parser = argparse.ArgumentParser()
    bench.add_parser(parser.add_subparsers(dest="verb"))
    return parser.parse_args(["bench", *argv])


def test_defaults_are_the_reference_shape():
    a = parse([])
    assert (a.prompts, a.group, a.max_new_tokens, a.full, a.dtype) == (4, 8, 128, False, "bfloat16")
    assert (a.steps, a.warmup, a.frameworks, a.sampler) == (3, 1, "rlvr,trl", "fast")


def test_flags_parse():
    a = parse(
        [
            "-P",
            "2",
            "-G",
            "4",
            "--max-new-tokens",
            "16",
            "--full",
            "--dtype",
            "float32",
            "--threads",
            "1",
            "--frameworks",
            "rlvr",
            "--trl-python",
            "/x/python",
        ]
    )
    assert (a.prompts, a.group, a.max_new_tokens, a.full, a.dtype, a.threads) == (2, 4, 16, True, "float32", 1)
    assert (a.frameworks, a.trl_python) == ("rlvr", "/x/python")


def test_unknown_framework_is_refused(capsys):
    assert bench.run(parse(["--frameworks", "rlvr,vllm"])) == 2
    assert "vllm" in capsys.readouterr().err


@pytest.mark.parametrize("lora, per_token", [(True, 4 * 100), (False, 6 * 100)])
def test_train_flops_per_token(lora, per_token):
    assert bench.train_flops_per_token(100, lora) == per_token


def test_fractions_by_hand():
    # N = 1e6 params, ceiling 1 GFLOP/s. Generation: 500 tokens in 2 s = 250 tok/s -> 2 * 1e6 * 250 = 5e8 FLOP/s
    # = 50% of 1e9. Update (LoRA, 4N): 1000 forwarded tokens in 8 s -> 4e6 * 1000 / 8 = 5e8 -> 50%; train tok/s
    # counts the 500 completion tokens over the 8 update seconds = 62.5.
    step = {"gen_tokens": 500, "generate": 2.0, "train": 8.0, "prompt_tokens": 30, "fwd_tokens": 1000}
    f = bench.fractions(step, 1_000_000, 1.0, {"lora": True, "group": 8})
    assert f["gen_tok_s"] == pytest.approx(250.0)
    assert f["train_tok_s"] == pytest.approx(62.5)
    assert f["gen_ceiling_frac"] == pytest.approx(0.5)
    assert f["train_ceiling_frac"] == pytest.approx(0.5)


def test_summarize_takes_rates_as_totals_over_totals():
    # 100 tokens in 1 s and 300 in 3 s: 400 / 4 = 100 tok/s (a mean of the two rates would also be 100; make
    # them differ: 100 in 1 s and 100 in 3 s -> 200 / 4 = 50, while the mean of rates is (100 + 33.3) / 2).
    rows = [
        {
            "wall": w,
            "generate": g,
            "verify": 0.0,
            "train": 1.0,
            "other": 0.0,
            "gen_tokens": 100,
            "prompt_tokens": 10,
            "fwd_tokens": 200,
            "active_rows": 4,
            "reward": r,
        }
        for w, g, r in ((2.0, 1.0, 0.0), (4.0, 3.0, 1.0))
    ]
    m = bench.summarize(rows, 1000, 1.0, {"lora": False, "group": 2})
    assert m["wall"] == pytest.approx(3.0)
    assert m["gen_tok_s"] == pytest.approx(50.0)
    assert m["reward"] == pytest.approx(0.5)
    assert bench.summarize([], 1000, 1.0, {"lora": False, "group": 2}) == {}


def test_ratios():
    a = {"wall": 10.0, "generate": 4.0, "train": 5.0, "gen_tok_s": 400.0, "train_tok_s": 200.0}
    b = {"wall": 50.0, "generate": 40.0, "train": 8.0, "gen_tok_s": 40.0, "train_tok_s": 100.0}
    q = bench.ratios(a, b, 1.0, 4.0)
    assert q == pytest.approx(
        {"wall": 0.2, "generate": 0.1, "train": 0.625, "gen_tok_s": 10.0, "train_tok_s": 2.0, "peak_rss": 0.25}
    )


def test_long_roofline_by_hand():
    """Two rows of 3 and 2 tokens, prompts of 4 tokens each: the prefill (8 tokens once) and decode steps t = 1, 2 at
    2 and 1 live rows, each reading the weights (100 bytes) and the live rows' KV cache (prompt + t tokens, 10 bytes
    each), at 100 bytes/s; at 1 GFLOP/s and 10 parameters only the reads count."""
    from rlvr_bench.roofline import long_roofline_s

    s = long_roofline_s([3, 2], 8, 4.0, 10, 100, 10, 100.0, 1.0)
    # prefill: max(100 / 100, 8 x 20 / 1e9); t=1: 2 rows, (100 + 2 x 5 x 10) / 100 = 2; t=2: 1 row, (100 + 6 x 10) / 100
    assert s == pytest.approx(1.0 + 2.0 + 1.6)
    # compute-bound once the rate of FLOPs is the smaller: 10 parameters at 1e-8 GFLOP/s, 2 rows = 40 / 10 = 4 s a step
    assert long_roofline_s([2, 2], 0, 0.0, 10, 0, 0, 1e12, 1e-8) == pytest.approx(0.0 + 4.0)


def test_step_floors_count_the_same_work_for_both_sides():
    from rlvr_bench.roofline import step_floors

    roof = {"weight_bytes": 100, "kv_bytes": 0, "rate": 100.0, "gflops": 1e9}
    r = {"lengths": [3, 1], "prompt_tokens": 6, "gen_tokens": 4, "fwd_tokens": 999}  # fwd_tokens: not the floor's
    f = step_floors(r, roof, 10, 40, 2.0, {"prompts": 2})
    # decode: prefill 1 s + one decode step (t=1, 1 row) 1 s + t=2 1 s; update: 40 FLOP x (4 + 6) tokens at 2 GFLOP/s
    assert f["decode_floor"] == pytest.approx(3.0)
    assert f["train_floor"] == pytest.approx(400 / 2e9)
    assert f["floor"] == pytest.approx(3.0 + 400 / 2e9)


def test_kv_bytes_per_token_reads_the_model_config(tokenizer, tmp_path):
    from rlvr_bench.roofline import kv_bytes_per_token

    folder = save_tiny_model(tokenizer, tmp_path)
    from transformers import AutoConfig

    c = AutoConfig.from_pretrained(folder)
    per_layer = 2 * c.num_key_value_heads * (c.hidden_size // c.num_attention_heads)
    assert kv_bytes_per_token(str(folder), 4) == c.num_hidden_layers * per_layer * 4


def test_config_and_sets_reach_both_workers_settings(tmp_path):
    from rlvr_bench.child import bench_config

    a = parse(["--config", "reasoning", "--set", "rollout.temperature=0.7", "--set", "task.settings.per_band=10"])
    assert (a.config, a.set) == ("reasoning", ["rollout.temperature=0.7", "task.settings.per_band=10"])
    spec = {"seed": 0, "prompts": 2, "group": 2, "max_new_tokens": 9, "lora": True, "bf16": False, "sampler": "fast"}
    cfg = bench_config({**spec, "config": a.config, "sets": a.set})
    # the reasoning preset's own settings, the shape flags on top, then --set
    assert cfg["algorithm"]["overlong"] == "filter" and cfg["train"]["micro_batch_tokens"] == 4096
    assert (cfg["rollout"]["max_new_tokens"], cfg["rollout"]["temperature"]) == (9, 0.7)
    assert cfg["task"]["settings"]["per_band"] == 10
    assert bench_config(spec)["algorithm"].get("overlong") != "filter"  # no config: the default preset


def _run_tiny(folder, frameworks, capsys, extra=()):
    args = parse(
        [
            "--model",
            str(folder),
            "--frameworks",
            frameworks,
            "-P",
            "2",
            "-G",
            "2",
            "--max-new-tokens",
            "6",
            "--steps",
            "1",
            "--warmup",
            "1",
            "--probe-size",
            "64",
            "--threads",
            "1",
            *extra,
        ]
    )
    assert bench.run(args) == 0
    return capsys.readouterr().out


def test_rlvr_side_runs_one_step_and_prints_the_table(tokenizer, tmp_path, capsys):
    out = _run_tiny(save_tiny_model(tokenizer, tmp_path), "rlvr", capsys)
    header = next(line for line in out.splitlines() if line.startswith("| framework"))
    assert [c.strip() for c in header.strip("|").split("|")] == list(bench.COLUMNS)
    rows = [line for line in out.splitlines() if line.startswith("| rlvr")]
    assert [r.split("|")[2].strip() for r in rows] == ["0*", "1", "mean"]  # warm-up, measured step, mean
    assert "2 prompts x 2 completions, max 6 new tokens, LoRA r=16, update in bf16, 1 threads" in out


@pytest.mark.skipif(importlib.util.find_spec("trl") is None, reason="TRL is not installed in this venv")
def test_trl_side_runs_one_step(tokenizer, tmp_path, capsys):
    out = _run_tiny(save_tiny_model(tokenizer, tmp_path), "rlvr,trl", capsys)
    assert len([line for line in out.splitlines() if line.startswith("| trl")]) == 3
    assert "rlvr / TRL: step time" in out


def test_the_bench_worker_runs_the_trainers_step(tmp_path, tokenizer):
    """The rlvr worker times `run_step`, the trainer's own step: for the same seed and shape its steps give the
    metrics that `rlvr train` logs (times aside), and its reported figures are those steps' figures."""
    import json

    from rlvr.config import merge
    from rlvr.policy.load import load_policy
    from rlvr.training.loop import train
    from rlvr.training.step import run_step
    from rlvr_bench.workers import bench_config, rlvr_state, step_figures

    folder = save_tiny_model(tokenizer, tmp_path / "tiny")
    spec = {
        "seed": 0,
        "prompts": 2,
        "group": 4,
        "max_new_tokens": 8,
        "lora": True,
        "bf16": True,
        "sampler": "fast",
        "model": str(folder),
        "steps": 2,
        "threads": 1,
    }
    state = rlvr_state(spec)
    results = [run_step(state, step) for step in range(2)]
    cfg = merge(
        bench_config(spec), {"output_dir": str(tmp_path / "run"), "train": {"steps": 2}, "log": {"eval_every": 0}}
    )
    run = train(cfg, policy=load_policy(str(folder)), quiet=True)
    logged = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]

    def same(row):
        return {k: v for k, v in row.items() if not k.startswith(("time/", "throughput/"))}

    assert [same(r.row) for r in results] == [same(r) for r in logged]
    figures = step_figures(results[1], state.algo.beta)
    assert figures["reward"] == logged[1]["reward/mean"] and figures["active_rows"] == logged[1]["active_rows"]
    assert figures["gen_tokens"] == int(results[1].batch.lengths.sum()) > 0


def test_the_update_s_forward_tokens_count_each_prompt_once_per_group():
    """rlvr's update runs each distinct prompt of the rows it keeps once (the prompt pass), then their completions:
    two groups of 3 with prompts of 5 and 7 tokens, the second group all zero advantage (skipped without KL): 5 + the
    first group's 2 + 3 + 4 completion tokens = 14, not 3 x 5 + 9. With a KL term every row runs: 5 + 7 + 12 = 24."""
    from types import SimpleNamespace

    from rlvr_bench.workers import step_figures

    class Batch(SimpleNamespace):
        def __len__(self):
            return len(self.prompt_ids)

    lengths = torch.tensor([2, 3, 4, 1, 1, 1])
    batch = Batch(
        prompt_ids=[[1] * 5] * 3 + [[2] * 7] * 3,
        lengths=lengths,
        mask=(torch.arange(4)[None, :] < lengths[:, None]).float(),
        advantages=torch.tensor([1.0, -1.0, 0.5, 0.0, 0.0, 0.0]),
    )
    row = {"step": 0, "time/generate": 1.0, "time/verify": 0.1, "time/train": 2.0, "time/step": 3.5}
    result = SimpleNamespace(row={**row, "reward/mean": 0.5}, batch=batch, update={"active_rows": 3})
    figures = step_figures(result, beta=0.0)
    assert (figures["fwd_tokens"], figures["prompt_tokens"], figures["gen_tokens"]) == (14, 12, 12)
    assert step_figures(result, beta=0.04)["fwd_tokens"] == 24


def test_a_peer_venv_is_checked_for_each_package_it_needs(tmp_path):
    import sys

    why = bench.check_peer_python(sys.executable, {"json": "json-pkg", "no_such_module_xyz": "no-such-pkg"}, "RECIPE")
    assert "lacks no-such-pkg:" in why and "json-pkg" not in why and "-m pip install no-such-pkg" in why
    assert bench.check_peer_python(sys.executable, {"json": "json"}, "RECIPE") is None
    assert "no such interpreter" in bench.check_peer_python(str(tmp_path / "python"), {"json": "json"}, "RECIPE")


@pytest.mark.skipif(importlib.util.find_spec("trl") is not None, reason="TRL is installed in this venv")
def test_bench_names_the_package_a_trl_venv_lacks_before_loading_anything(capsys):
    import sys

    assert bench.run(parse(["--trl-python", sys.executable])) == 1
    err = capsys.readouterr().err
    assert "lacks trl" in err and "pip install trl" in err
    assert bench.run(parse(["--budget", "1", "--frameworks", "rlvr", "--trl-python", sys.executable])) == 1
