"""`rlvr bench --vs trl --budget`: which checkpoints become points on the curve, the minutes each side had trained at
them, and the report's paired comparison of the finals, on hand-made records with known answers. (The TRL worker
itself runs under TRL's interpreter; tests/test_bench.py runs it where RLVR_TRL_PYTHON is set.)"""

import json

import pytest

from rlvr.evaluation.records import EvalRecord, write_records
from rlvr_bench import time_to_accuracy as tta


def test_choose_takes_the_nearest_checkpoint_per_target_and_the_final():
    pts = [(0.9, "a"), (2.8, "b"), (3.3, "c"), (5.9, "d"), (9.1, "e")]
    assert tta.choose(pts, [3.0, 6.0]) == [(2.8, "b"), (5.9, "d"), (9.1, "e")]
    assert tta.choose(pts, [9.0, 20.0]) == [(9.1, "e")]  # no repeats when targets land on the final


def test_points_read_each_sides_minutes(tmp_path):
    run = tmp_path / "rlvr"
    (run / "checkpoints" / "step-2").mkdir(parents=True)
    (run / "checkpoints" / "step-3").mkdir()
    (run / "metrics.jsonl").write_text("".join(json.dumps({"time/step": t}) + "\n" for t in (30, 60, 90)))
    assert tta.rlvr_points(run) == [(1.5, run / "checkpoints" / "step-2"), (3.0, run / "checkpoints" / "step-3")]
    side = tmp_path / "trl"
    side.mkdir()
    (side / "checkpoints.jsonl").write_text('{"step": 4, "minutes": 2.5}\n{"step": 2, "minutes": 1.0}\n')
    assert tta.trl_points(side) == [(1.0, side / "checkpoints" / "step-2"), (2.5, side / "checkpoints" / "step-4")]


def records(correct: list[bool]) -> list[EvalRecord]:
    """One greedy and one sampled record per problem, bands a/b alternating."""
    out = []
    for i, ok in enumerate(correct):
        for mode in ("greedy", "sampled"):
            out.append(
                EvalRecord(
                    problem_id=f"p{i}",
                    band="ab"[i % 2],
                    sample_idx=0,
                    status="correct" if ok else "wrong",
                    reward=float(ok),
                    extracted="1",
                    completion="",
                    mode=mode,
                )
            )
    return out


def test_report_compares_the_finals_and_draws_the_curve(tmp_path):
    run, side = tmp_path / "rlvr", tmp_path / "trl"
    for folder, n in ((run, 12), (side, 3)):
        folder.mkdir()
        (folder / "metrics.jsonl").write_text("{}\n" * n)
    curves = {
        "rlvr": [(4.0, run / "checkpoints" / "step-6"), (9.0, run / "checkpoints" / "step-12")],
        "trl": [(9.2, side / "checkpoints" / "step-3")],
    }
    truth = {
        "start": [False] * 8,
        "rlvr-step-6": [True, False] * 4,
        "rlvr-step-12": [True] * 6 + [False] * 2,
        "trl-step-3": [True] + [False] * 7,
    }
    for name, correct in truth.items():
        write_records(records(correct), tmp_path / "eval" / name / "records.jsonl")
    assert tta.report(tmp_path, {"rlvr": run, "trl": side}, curves) == 0
    result = json.loads((tmp_path / "compare-greedy-vs-trl.json").read_text())
    assert result["diffs"]["rlvr"]["all"]["diff"] == pytest.approx(6 / 8 - 1 / 8)
    vs_start = json.loads((tmp_path / "compare-greedy-vs-start.json").read_text())
    assert vs_start["diffs"]["trl"]["a"]["diff"] == pytest.approx(1 / 4)
    summary = json.loads((tmp_path / "time_to_accuracy.json").read_text())
    assert summary["steps"] == {"rlvr": 12, "trl": 3}
    assert [p["all"]["value"] for p in summary["points"]["rlvr"]] == [0.5, 0.75]
    assert summary["points"]["start"][0]["minutes"] == 0.0
    assert (tmp_path / "time_to_accuracy.png").stat().st_size > 10_000
    assert "RL steps in the budget: rlvr 12, TRL 3." in (tmp_path / "time_to_accuracy.md").read_text()


def test_report_of_trl_alone_compares_it_with_the_start(tmp_path):
    side = tmp_path / "trl"
    side.mkdir()
    (side / "metrics.jsonl").write_text("{}\n" * 3)
    for name, correct in {"start": [False] * 6 + [True] * 2, "trl-step-3": [True] * 3 + [False] * 5}.items():
        write_records(records(correct), tmp_path / "eval" / name / "records.jsonl")
    assert tta.report(tmp_path, {"trl": side}, {"trl": [(60.0, side / "checkpoints" / "step-3")]}) == 0
    vs_start = json.loads((tmp_path / "compare-greedy-vs-start.json").read_text())
    assert vs_start["diffs"]["trl"]["all"]["diff"] == pytest.approx(3 / 8 - 2 / 8)
    assert not (tmp_path / "compare-greedy-vs-trl.json").exists()  # nothing to hold against TRL but the start
    assert json.loads((tmp_path / "time_to_accuracy.json").read_text())["steps"] == {"trl": 3}
    assert "RL steps in the budget: TRL 3." in (tmp_path / "time_to_accuracy.md").read_text()


def test_trl_alone_takes_the_config_and_overrides_both_sides_read(tmp_path):
    """--frameworks trl: the comparison config is --config with --set on top, written where both the TRL worker and
    the evaluations read it; the TRL spec carries its shape, its model and the file (its task, prompt, reward, lr)."""
    import argparse

    import yaml

    from rlvr.policy.load import resolve_model_path

    args = argparse.Namespace(
        config="docs/examples/multi_step/multi_step.yaml",
        set=["task.settings.demo=none", "rollout.max_new_tokens=64", "train.autocast=none"],
        seed=3,
        frameworks="trl",
        rlvr_run="",
        threads=2,
        budget=5.0,
        trl_save_every=1,
    )
    assert tta.train_rlvr(tmp_path, args) is None
    config = tta.comparison_config(tmp_path, None, args)
    cfg = yaml.safe_load(config.read_text())
    assert cfg["seed"] == 3 and cfg["task"]["settings"]["demo"] == "none" and cfg["rollout"]["max_new_tokens"] == 64
    spec = tta.trl_spec(config, args, tmp_path / "trl")
    assert spec["config"] == str(config) and (spec["prompts"], spec["group"], spec["max_new_tokens"]) == (4, 8, 64)
    assert spec["model"] == resolve_model_path("smollm2-135m-instruct") and spec["bf16"] is False
    assert tta.task_flags(config)[:2] == ["--task", "jsonl"]
    assert 'task.settings.demo="none"' in tta.task_flags(config)
    args.set[-1] = "train.autocast=bfloat16"  # the bf16 kinds' `auto`: TRL's side then trains with bf16=True too
    assert tta.trl_spec(tta.comparison_config(tmp_path, None, args), args, tmp_path / "trl")["bf16"] is True


def test_cpu_busy_is_a_fraction_and_sees_a_busy_core():
    import os
    import threading
    import time

    stop = time.monotonic() + 0.6
    spinner = threading.Thread(target=lambda: [None for _ in iter(lambda: time.monotonic() > stop, True)])
    spinner.start()
    busy = tta.cpu_busy(0.3)
    spinner.join()
    assert 0.0 <= busy <= 1.0
    assert busy >= 0.5 / (os.cpu_count() or 1)  # one spinning thread shows, however many cores
