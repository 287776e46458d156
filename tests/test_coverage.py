"""Coverage, not just pass@1: the k of the curve, pass@k per band by hand, `rlvr eval --n K` reporting every k by
default, and the report's pass@k-against-k plot."""

import argparse
import json

import pytest

from rlvr.evaluation.records import EvalRecord
from rlvr.evaluation.report import pass_at_k_plot
from rlvr.evaluation.stats import coverage_ks
from rlvr.evaluation.summary import summarize
from test_evaluation_run_eval import make_run_dir


@pytest.mark.parametrize(
    "n, expected", [(0, []), (1, [1]), (2, [1, 2]), (4, [1, 2, 4]), (6, [1, 2, 4, 6]), (32, [1, 2, 4, 8, 16, 32])]
)
def test_coverage_ks(n, expected):
    assert coverage_ks(n) == expected


def test_pass_at_k_curve_by_hand(tmp_path):
    """Two problems, 4 samples: one right once (pass@1 1/4, pass@2 1 - C(3,2)/C(4,2) = 1/2, pass@4 1), one never
    (0 at every k); overall 1/8, 1/4, 1/2."""
    recs = [
        EvalRecord(
            problem_id=p,
            band="b",
            sample_idx=i,
            status="correct" if (p, i) == ("x", 2) else "wrong",
            reward=0.0,
            extracted=None,
            completion="",
        )
        for p in ("x", "y")
        for i in range(4)
    ]
    summary = summarize(recs, ks=coverage_ks(4), n_boot=100)
    assert summary["ks"] == [1, 2, 4]
    assert [summary["overall"]["pass@k"][k]["value"] for k in ("1", "2", "4")] == pytest.approx([0.125, 0.25, 0.5])
    path = pass_at_k_plot({"start": summary, "rlvr": summary}, tmp_path / "p.png")
    assert path.exists() and path.stat().st_size > 1000
    only_one = summarize(recs, ks=(1,), n_boot=10)
    assert pass_at_k_plot({"start": only_one}, tmp_path / "q.png") is None and not (tmp_path / "q.png").exists()


def test_eval_n_reports_every_k_by_default(tmp_path, tokenizer):
    from rlvr.cli import eval as eval_verb

    run = make_run_dir(tmp_path, tokenizer)
    parser = argparse.ArgumentParser()
    eval_verb.add_parser(parser.add_subparsers(dest="verb"))
    args = parser.parse_args(
        [
            "eval",
            "--model",
            str(run),
            "--n",
            "4",
            "--max-new-tokens",
            "2",
            "--limit",
            "2",
            "--quiet",
            "--no-greedy",
            "--set",
            "reward.workers=0",
        ]
    )
    assert eval_verb.run(args) == 0
    summary = json.loads((run / "eval" / "heldout" / "summary.json").read_text())
    assert summary["ks"] == [1, 2, 4] and list(summary["overall"]["pass@k"]) == ["1", "2", "4"]
    for cell in summary["overall"]["pass@k"].values():
        assert cell["lo"] <= cell["value"] <= cell["hi"]
