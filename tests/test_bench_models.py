"""`rlvr bench --model SHAPES`: the published shapes build as their families, `--model` routes to them, the memory
refusal and the share ratio by hand, and the whole run end to end on tiny shapes (a reference, a family the fast
sampler runs, one it falls back to hf for), rlvr's sides only (TRL needs its own venv)."""

import argparse
import json
import re

import pytest

from conftest import tiny_shape, trl_python
from rlvr_bench import bench, models, shapes
from rlvr_bench.shapes import REFERENCE, SHAPES, Shape


def parse(argv):
    parser = argparse.ArgumentParser()
    bench.add_parser(parser.add_subparsers(dest="verb"))
    return parser.parse_args(["bench", *argv])


def test_model_names_a_list_of_shapes_or_all_of_them():
    assert shapes.parse_shapes("qwen3-0.6b, smollm3-3b") == ["qwen3-0.6b", "smollm3-3b"]
    assert shapes.parse_shapes("families") == ["llama3.2-1b", "qwen3-0.6b", "smollm3-3b", "gemma3-270m", "qwen3.5-0.8b"]
    # an embedded name, a folder, or a list with one unknown name is the reference step bench's --model
    assert shapes.parse_shapes("smollm2-135m-instruct") is None and shapes.parse_shapes("qwen3-0.6b,nope") is None


def test_a_trl_venv_is_checked_before_any_shape_is_built(tmp_path, capsys):
    args = parse(["--model", "families", "--trl-python", str(tmp_path / "python"), "--work-dir", str(tmp_path / "m")])
    assert bench.run(args) == 1
    assert "no such interpreter" in capsys.readouterr().err and not (tmp_path / "m").exists()


@pytest.mark.parametrize(
    "name, model_type, params_m",
    [  # the published sizes: Qwen3.5-0.8B's text model is 0.75B of its 0.8B (the rest is its vision encoder)
        ("llama3.2-1b", "llama", 1236),
        ("qwen3-0.6b", "qwen3", 596),
        ("smollm3-3b", "smollm3", 3075),
        ("gemma3-270m", "gemma3_text", 268),
        ("qwen3.5-0.8b", "qwen3_5_text", 752),
    ],
)
def test_each_published_shape_builds_as_its_family(name, model_type, params_m):
    config = shapes.shape_config(SHAPES[name])
    s = shapes.sizes(config, "bfloat16")
    assert config.model_type == model_type and round(s["params"] / 1e6) == params_m
    # every vocabulary holds the embedded tokenizer's 49,152 ids; a tied head is read once a step, in bf16
    assert s["vocab"] >= 49152 and s["weight_bytes"] == pytest.approx(2 * s["params"], rel=0.001)


def test_a_side_that_would_not_fit_is_refused_in_one_line():
    s = {"weight_bytes": 6e9, "embed": 262e6, "vocab": 128256}  # SmolLM3-3B in bf16, about
    need = {side: models.estimate_bytes(side, s, 32, 128) for side in ("fast", "hf", "trl")}
    update = 16 * 228 * 128256 * 4  # a micro-batch of 16 rows x (100 prompt + 128 new tokens), float32 logits
    assert need["fast"] == pytest.approx(1.2e9 + 2 * 6e9 + 4 * 262e6 + update)
    # hf: its copy, its sync's merged float32 weights, and 32 rows x 128 tokens of logits kept for the log-probs
    assert need["hf"] == pytest.approx(1.2e9 + 4 * 6e9 + 8 * 32 * 128 * 128256 + update)
    assert need["trl"] == pytest.approx(1.2e9 + 6e9 + 3 * update)
    assert models.refusal("smollm3-3b", "hf", need["hf"], 19_000_000_000) == (
        "smollm3-3b hf: needs about 31.3 GB, 19.0 GB available: not run"
    )
    assert models.refusal("smollm3-3b", "fast", need["fast"], 19_000_000_000) is None


def test_the_guard_stops_a_child_when_memory_runs_low():
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    with models.MemoryGuard(proc, floor=float("inf")) as guard:  # any available memory is below this floor
        proc.wait(timeout=10)
    assert proc.returncode == -9 and guard.tripped[0] > 0 and guard.tripped[1] > 0  # available, the child's peak
    quiet = subprocess.Popen([sys.executable, "-c", "pass"])
    with models.MemoryGuard(quiet) as guard:
        quiet.wait(timeout=10)
    assert quiet.returncode == 0 and guard.tripped is None


def test_the_ratio_is_the_fast_shares_over_the_reference_s_and_none_without_a_fast_path():
    ref = {"sides": {"fast": {"roofline_frac": 0.40, "fallback": ""}}}
    model = {"sides": {"fast": {"roofline_frac": 0.30, "fallback": ""}}}
    assert models.share_ratio(model, ref) == pytest.approx(0.75)  # 0.30 / 0.40, above the goal of 2/3
    fell_back = {"sides": {"fast": {"roofline_frac": 0.05, "fallback": "rollout.backend=fast does not run ..."}}}
    assert models.share_ratio(fell_back, ref) is None
    assert models.share_ratio({"sides": {"fast": {"refused": "..."}}}, ref) is None


def test_a_side_s_summary_is_totals_over_totals_and_its_roofline_share():
    # 2 steps after 1 warm-up; N = 1e6 params, read floor 10 ms, compute floor off (a huge probe rate). Step 1: 4 rows
    # of 3 tokens -> the prefill + 2 decode steps, 3 floors = 30 ms; in 60 ms of sampling. Step 2 the same in 90 ms.
    # share = 60 / 150 ms = 0.4; tokens/s = 24 tokens / 0.15 s = 160
    step = {"lengths": [3] * 4, "prompt_tokens": 10, "gen_tokens": 12, "train": 1.0, "wall": 2.0}
    run = {
        "ready": {"sampler": "FastSampler", "fallback": ""},
        "steps": [{**step, "generate": 9.0}, {**step, "generate": 0.06}, {**step, "generate": 0.09, "wall": 3.0}],
        "peak_rss": 1e9,
        "estimate": 2e9,
    }
    x = models.side_summary(run, "fast", 1, {"params": 1_000_000, "read_s": 0.01, "gflops": 1e9})
    assert x["roofline_frac"] == pytest.approx(0.4) and x["gen_tok_s"] == pytest.approx(160)
    assert (x["wall"], x["train"], x["sampler"], x["fallback"]) == (2.5, 1.0, "FastSampler", "")


def test_a_failed_side_is_its_error_line_and_no_figure():
    log = "tiny fast worker exited (code 1) before 'step'\nTraceback (most recent call last):\n  File ...\n"
    log += "IndexError: list index out of range\n"
    assert models.failure_line(log) == "IndexError: list index out of range"
    assert models.failure_line("worker exited (code -9) before 'ready'") == "worker exited (code -9) before 'ready'"
    run = {"failed": "tiny fast: IndexError: list index out of range", "estimate": 1e9}
    assert models.side_summary(run, "fast", 1, {}) == {"failed": run["failed"]}
    assert (
        models.share_ratio({"sides": {"fast": {"failed": "..."}}}, {"sides": {"fast": {"roofline_frac": 0.4}}}) is None
    )


def tiny(model_type: str, **extra) -> dict:
    """A tiny config of the real tokenizer's vocabulary (so its ids fit, as they fit every published shape)."""
    return dict(model_type=model_type, **tiny_shape(49152), **extra)


TINY = {
    REFERENCE: Shape("tiny llama", tiny("llama")),
    "tiny-qwen3": Shape("tiny qwen3", tiny("qwen3", head_dim=16)),
    # weights the fast forward has no place for (found when the sampler loads them): the fast side samples with hf
    "tiny-biased": Shape("tiny llama with MLP biases", tiny("llama", mlp_bias=True)),
}


def tiny_args(tmp_path, model: str, frameworks: str, *extra: str):
    return parse(
        [
            "--model",
            model,
            "--frameworks",
            frameworks,
            *extra,
            "-P",
            "2",
            "-G",
            "2",
            "--max-new-tokens",
            "4",
            "--steps",
            "1",
            "--warmup",
            "1",
            "--probe-size",
            "64",
            "--threads",
            "1",
            "--work-dir",
            str(tmp_path / "models"),
        ]
    )


def test_the_run_measures_every_side_and_reports_the_fallback_as_such(tokenizer, tmp_path, capsys):
    args = tiny_args(tmp_path, "tiny-qwen3,tiny-biased", "rlvr")
    result = models.bench_models(args, shapes.parse_shapes(args.model, TINY), ["fast", "hf"], TINY)
    print(models.format_models(result))
    out = capsys.readouterr().out
    m = result["models"]
    assert list(m) == [REFERENCE, "tiny-qwen3", "tiny-biased"]
    for n in m:  # every side ran a warm-up and a measured step of 2 x 2 rows, each to its 4 new tokens (random model)
        for side in ("fast", "hf"):
            steps = m[n]["runs"][side]["steps"]
            assert [len(s["lengths"]) for s in steps] == [4, 4] and m[n]["sides"][side]["gen_tok_s"] > 0
            assert 0 < m[n]["sides"][side]["roofline_frac"]
    assert [m[n]["sides"]["fast"]["sampler"] for n in m] == ["FastSampler", "FastSampler", "HFSampler"]
    assert m["tiny-biased"]["sides"]["fast"]["fallback"] == (
        "rollout.backend=fast does not run this model: biases on o_proj or the MLP; sampling with hf"
    )
    # the ratio as stated: the family's fast share over the reference's; none where the fast side fell back
    share = {n: m[n]["sides"]["fast"]["roofline_frac"] for n in m}
    assert m["tiny-qwen3"]["ratio"] == pytest.approx(share["tiny-qwen3"] / share[REFERENCE])
    assert m["tiny-biased"]["ratio"] is None and m[REFERENCE]["ratio"] is None
    # the report: the header says what the weights are, the summary a row a model, the fallback never a fast figure
    assert out.startswith("random weights of the published config: speed only")
    summary = out.split("\n\n")[1].splitlines()
    assert summary[0].split("|")[4:6] == [" fast tok/s ", " hf tok/s "]
    rows = {r.split("|")[1].strip(): [c.strip() for c in r.split("|")[1:-1]] for r in summary[2:]}
    assert list(rows) == list(m)
    assert rows["tiny-biased"][3] == "hf fallback" and rows["tiny-biased"][-1] == "none: no fast path (hf fallback)"
    assert (
        rows["tiny-qwen3"][-1]
        == f"{m['tiny-qwen3']['ratio']:.2f} ({'met' if m['tiny-qwen3']['ratio'] >= 2 / 3 else 'not met'})"
    )
    assert "- tiny-biased: rollout.backend=fast does not run this model: biases on o_proj or the MLP" in out
    json.dumps(result)  # plain data, as --json writes it


@pytest.mark.skipif(trl_python() is None, reason="trl is not installed here; set RLVR_TRL_PYTHON to a venv with trl")
def test_trl_runs_each_shape_from_its_folder(tokenizer, tmp_path):
    args = tiny_args(tmp_path, "tiny-qwen3", "trl", "--trl-python", trl_python())
    result = models.bench_models(args, ["tiny-qwen3"], ["trl"], TINY)
    for m in result["models"].values():
        trl = m["sides"]["trl"]
        assert [len(s["lengths"]) for s in m["runs"]["trl"]["steps"]] == [4, 4]  # TRL's rows, each to 4 tokens
        assert trl["gen_tok_s"] > 0 and trl["roofline_frac"] > 0 and m["ratio"] is None  # no fast side: no ratio
    assert "| trl tok/s |" in models.format_models(result)


def test_a_side_the_guard_stops_is_reported_and_the_run_goes_on(tokenizer, tmp_path, monkeypatch):
    """A worker whose machine runs short of memory is stopped and reported in one line, not raised: the other
    models and sides of the run are still measured."""
    args = tiny_args(tmp_path, REFERENCE, "rlvr")
    path = shapes.folder(REFERENCE, TINY[REFERENCE], tmp_path / "models", "float32")
    s = shapes.sizes(shapes.shape_config(TINY[REFERENCE]), "float32")
    monkeypatch.setattr(models, "GUARD_BYTES", float("inf"))  # any available memory is too little
    run = models.run_side(REFERENCE, path, "fast", s, args, "float32")
    assert re.fullmatch(
        rf"{REFERENCE} fast: stopped at \d+\.\d GB, the machine down to \d+\.\d GB available "
        r"\(estimated \d+\.\d GB\): does not fit",
        run["refused"],
    )
    assert models.side_summary(run, "fast", 1, {}) == {"refused": run["refused"]}
