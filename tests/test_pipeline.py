"""The main job end to end on a tiny saved model: every artefact exists and the report's numbers are the
numbers of the files it was built from."""

import json

import pytest

from conftest import make_tiny_llama
from test_trainer import tiny_config


@pytest.fixture
def tiny_model_dir(tmp_path, tokenizer):
    path = tmp_path / "tiny-model"
    make_tiny_llama(len(tokenizer)).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def test_main_job_writes_a_consistent_report(tmp_path, tiny_model_dir):
    from rlvr.training.main_job import run_main

    cfg = tiny_config(tmp_path, **{"model.name": str(tiny_model_dir), "output_dir": str(tmp_path / "main"),
                                   "train.steps": 2, "log.eval_every": 1, "log.eval_problems": 4,
                                   "eval.n": 2, "eval.ks": "[1, 2]", "eval.limit": 6, "sft.epochs": 1})
    out = run_main(cfg, quiet=True)
    _check_report(tmp_path / "main", out)


@pytest.mark.slow
def test_main_job_on_the_default_model_with_a_tiny_budget(tmp_path):
    """`rlvr run`'s own preset (the real SmolLM2-135M-Instruct, fast sampler, bf16) shrunk to two RL steps:
    the same artefacts, the same agreement between the report and its files."""
    from rlvr.config import resolve
    from rlvr.training.main_job import run_main

    sets = ["train.steps=2", "train.time_budget_min=0", "log.eval_every=1", "log.eval_problems=3",
            "rollout.prompts_per_step=2", "rollout.group_size=4", "rollout.max_new_tokens=32", "eval.n=2",
            "eval.ks=[1, 2]", "eval.limit=6", "sft.epochs=1", f"output_dir={tmp_path / 'main'}"]
    out = run_main(resolve("default", sets), quiet=True)
    _check_report(tmp_path / "main", out)


def _check_report(root, out) -> None:
    for rel in ("report.md", "compare.json", "compare.md", "compare.png", "plots/training.png", "config.yaml",
                "eval/start/records.jsonl", "eval/sft/summary.json", "eval/rlvr/summary.json",
                "rlvr/metrics.jsonl", "rlvr/final/merged/config.json", "sft/final/merged/config.json"):
        assert (root / rel).exists(), rel
    report = (root / "report.md").read_text()
    compare = json.loads((root / "compare.json").read_text())
    assert compare["models"] == ["start", "sft", "rlvr"] and compare["baseline"] == "start"
    # the comparison's overall pass@1 of each model is its own summary's figure
    for name in ("start", "sft", "rlvr"):
        summary = json.loads((root / "eval" / name / "summary.json").read_text())
        assert compare["accuracy"][name]["all"]["value"] == pytest.approx(summary["overall"]["pass@k"]["1"]["value"])
        assert f"{summary['overall']['pass@k']['1']['value']:.3f}" in report
    rows = [json.loads(x) for x in (root / "rlvr" / "metrics.jsonl").read_text().splitlines()]
    assert f"- **steps trained**: {len(rows)}" in report
    assert "![RLVR training](plots/training.png)" in report and "Ten held-out examples" in report
    assert out["report"] == root / "report.md"
