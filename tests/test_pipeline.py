"""The main job end to end on a tiny saved model: every artefact exists and the report's numbers are the
numbers of the files it was built from."""

import json
import re

import pytest
import torch

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

    cfg = tiny_config(
        tmp_path,
        **{
            "model.name": str(tiny_model_dir),
            "output_dir": str(tmp_path / "main"),
            "train.steps": 2,
            "log.eval_every": 1,
            "log.eval_problems": 4,
            "eval.n": 2,
            "eval.ks": "[1, 2]",
            "eval.limit": 6,
            "sft.epochs": 1,
        },
    )
    out = run_main(cfg, quiet=True)
    _check_report(tmp_path / "main", out)


def test_a_rerun_evaluates_again_under_new_eval_settings_and_refuses_new_training_settings(
    tmp_path, tiny_model_dir, capsys
):
    """A finished main job run again into its folder reuses its trained phases, evaluates again where the eval
    settings changed (never reporting n = 2 evaluations as n = 4 ones), and refuses a change to how it trained."""
    from rlvr.config import ConfigError
    from rlvr.training.main_job import run_main

    root = tmp_path / "main"
    base = {
        "model.name": str(tiny_model_dir),
        "output_dir": str(root),
        "train.steps": 2,
        "log.eval_every": 0,
        "eval.n": 2,
        "eval.ks": "[1, 2]",
        "eval.limit": 6,
        "eval.out_of_domain": "[]",
        "sft.epochs": 1,
    }
    run_main(tiny_config(tmp_path, **base), quiet=True)

    def phase_files():  # every file the training phases wrote, and when (the model card gets the new held-out table)
        return {
            f: f.stat().st_mtime_ns
            for p in ("rlvr", "sft")
            for f in (root / p).rglob("*")
            if f.is_file() and f.name not in ("README.md", ".rlvr.lock")
        }

    trained = phase_files()
    capsys.readouterr()

    out = run_main(tiny_config(tmp_path, **{**base, "eval.n": 4}), quiet=True)
    printed = capsys.readouterr().out
    for name in ("start", "sft", "rlvr"):
        summary = json.loads((root / "eval" / name / "summary.json").read_text())
        assert summary["setup"]["n"] == 4 and summary["overall"]["samples_per_problem"] == 4
        assert summary["setup"]["ks"] == [1, 2, 4]  # the coverage curve grows with n
        assert f"eval/{name}: evaluated with n=2, ks=[1, 2]; this run asks n=4, ks=[1, 2, 4]" in printed
    assert phase_files() == trained  # neither phase trained again
    report = out["report"].read_text()
    assert "4 samples per problem" in report
    # the wall time counts the evaluations this rerun made, and names the training it read back
    assert re.search(r"wall time\*\*: [0-9.]+ min \(eval start [0-9.]+, eval sft [0-9.]+, eval rlvr [0-9.]+", report)
    assert "; read back from an earlier one: train rlvr, train sft\n" in report

    before = (root / "eval" / "rlvr" / "records.jsonl").read_text()
    out = run_main(tiny_config(tmp_path, **{**base, "eval.n": 4}), quiet=True)  # the same settings: read back
    assert "evaluating again" not in capsys.readouterr().out
    assert (root / "eval" / "rlvr" / "records.jsonl").read_text() == before
    # nothing evaluated this time: each evaluation is listed with the minutes it took when it ran, none as 0 min work
    line = next(x for x in out["report"].read_text().splitlines() if "wall time" in x)
    spent, read_back = line.split(" in this invocation; read back from an earlier one: ")
    assert "eval start" not in spent and "eval rlvr" not in spent
    assert re.fullmatch(r"eval start \([0-9.]+ min then\), train rlvr, train sft, eval sft .*, eval rlvr .*", read_back)
    assert "read_back" not in (root / "eval" / "start" / "summary.json").read_text()

    with pytest.raises(ConfigError, match=r"rlvr finished with other settings than this run's \(train\.lr\)"):
        run_main(tiny_config(tmp_path, **{**base, "eval.n": 4, "train.lr": 1e-3}), quiet=True)


@pytest.mark.slow
def test_main_job_on_the_default_model_with_a_tiny_budget(tmp_path):
    """`rlvr run`'s own preset (the real SmolLM2-135M-Instruct, fast sampler, bf16) shrunk to two RL steps:
    the same artefacts, the same agreement between the report and its files."""
    from rlvr.config import resolve
    from rlvr.training.main_job import run_main

    sets = [
        "train.steps=2",
        "train.time_budget_min=0",
        "log.eval_every=1",
        "log.eval_problems=3",
        "rollout.prompts_per_step=2",
        "rollout.group_size=4",
        "rollout.max_new_tokens=32",
        "eval.n=2",
        "eval.ks=[1, 2]",
        "eval.limit=6",
        "sft.epochs=1",
        f"output_dir={tmp_path / 'main'}",
    ]
    out = run_main(resolve("default", sets), quiet=True)
    _check_report(tmp_path / "main", out)


def _check_report(root, out) -> None:
    for rel in (
        "report.md",
        "compare.json",
        "compare.md",
        "compare.png",
        "plots/training.png",
        "config.yaml",
        "eval/start/records.jsonl",
        "eval/sft/summary.json",
        "eval/rlvr/summary.json",
        "rlvr/metrics.jsonl",
        "rlvr/final/merged/config.json",
        "sft/final/merged/config.json",
    ):
        assert (root / rel).exists(), rel
    report = (root / "report.md").read_text()
    compare = json.loads((root / "compare.json").read_text())
    assert compare["models"] == ["start", "sft", "rlvr"] and compare["baseline"] == "start"
    # the comparison's overall pass@1 of each model is its own summary's figure
    for name in ("start", "sft", "rlvr"):
        summary = json.loads((root / "eval" / name / "summary.json").read_text())
        assert compare["accuracy"][name]["all"]["value"] == pytest.approx(summary["overall"]["pass@k"]["1"]["value"])
        assert f"{summary['overall']['pass@k']['1']['value']:.3f}" in report
    # RLVR against the SFT baseline, paired: its differences are the two summaries' figures subtracted
    against = json.loads((root / "compare-sft.json").read_text())
    assert [r["metric"] for r in against] == ["pass@1", "greedy"]
    assert [r["diffs"] for r in out["against_sft"]] == [r["diffs"] for r in against]  # the file holds what ran
    summaries = {m: json.loads((root / "eval" / m / "summary.json").read_text())["overall"] for m in ("sft", "rlvr")}
    figure = {"pass@1": lambda s: s["pass@k"]["1"]["value"], "greedy": lambda s: s["greedy"]["value"]}
    for r in against:
        assert (r["baseline"], r["models"]) == ("sft", ["sft", "rlvr"])
        diff = r["diffs"]["rlvr"]["all"]["diff"]
        assert diff == pytest.approx(figure[r["metric"]](summaries["rlvr"]) - figure[r["metric"]](summaries["sft"]))
        assert f"| all | {r['metric']} | " in report and f"{diff:+.3f}" in report
    assert "## RLVR against the SFT baseline" in report and "rlvr vs sft:" in report
    rows = [json.loads(x) for x in (root / "rlvr" / "metrics.jsonl").read_text().splitlines()]
    assert f"- **steps trained**: {len(rows)}" in report
    assert "![RLVR training](plots/training.png)" in report and "Ten held-out examples" in report
    assert out["report"] == root / "report.md"


def test_main_job_with_the_remote_backend(tmp_path, tiny_model_dir):
    """rollout.backend: remote reaches every phase with its settings (the servers' urls): the start model and
    SFT's sampling use the servers' base model, the RL run pushes its adapter each step, and each trained run is
    evaluated as its final adapter on that base; the report agrees with its files."""
    from rlvr.training.main_job import run_main
    from standin_vllm import BASE_MODEL, StandinServer, model_scorer

    with StandinServer(scorer=model_scorer(tiny_model_dir)) as server:
        cfg = tiny_config(
            tmp_path,
            **{
                "model.name": str(tiny_model_dir),
                "output_dir": str(tmp_path / "main"),
                "train.steps": 2,
                "eval.n": 2,
                "eval.ks": "[1, 2]",
                "eval.limit": 6,
                "sft.epochs": 1,
                "rollout.backend": "remote",
                "rollout.urls": f"[{server.url}]",
            },
        )
        out = run_main(cfg, quiet=True)
    _check_report(tmp_path / "main", out)
    completions = [body["model"] for path, body in server.log if path == "/v1/completions"]
    pushed = [body["lora_name"] for path, body in server.log if path == "/v1/load_lora_adapter"]
    # 2 RL steps push twice; the SFT and RLVR evaluations push their run's final adapter once each
    assert len(pushed) == 4
    # start eval (6 problems: sampled + greedy) and SFT's sampling ask for the base model; the rest for adapters
    assert BASE_MODEL in completions and set(completions) - {BASE_MODEL} <= set(pushed)
    for name in ("start", "sft", "rlvr"):
        summary = json.loads((tmp_path / "main" / "eval" / name / "summary.json").read_text())
        assert summary["setup"]["backend"] == "remote"


def test_evaluating_a_run_with_the_remote_backend_pushes_its_final_adapter(tmp_path, tiny_model_dir, monkeypatch):
    """`rlvr eval` of a run directory trained with the remote backend reads the servers' urls from the run and
    serves the run's own final adapter (the bytes it saved), not the base model."""
    from safetensors.torch import load_file

    from rlvr.evaluation.run_eval import EvalSettings, evaluate_model
    from rlvr.sampling import remote
    from rlvr.training.loop import train
    from standin_vllm import StandinServer, model_scorer

    pushed = []
    real_sync = remote.RemoteSampler.sync

    def sync(self, model, push=True, state_dict=None):  # record the adapter's tensors as they are pushed
        real_sync(self, model, push, state_dict)
        pushed.append(load_file(self.adapter_dir / self.adapter_name / "adapter_model.safetensors"))

    monkeypatch.setattr(remote.RemoteSampler, "sync", sync)
    with StandinServer(scorer=model_scorer(tiny_model_dir)) as server:
        cfg = tiny_config(
            tmp_path,
            **{"model.name": str(tiny_model_dir), "rollout.backend": "remote", "rollout.urls": f"[{server.url}]"},
        )
        run = train(cfg, quiet=True)
        pushed.clear()
        _, summary = evaluate_model(run, None, EvalSettings(backend=None, n=2, ks=(1, 2), limit=4, progress=False))
    saved = load_file(run / "final" / "adapter" / "adapter_model.safetensors")
    assert len(pushed) == 1 and summary["setup"]["backend"] == "remote"
    assert {k.replace(".default", "") for k in pushed[0]} == set(saved)
    for key, value in pushed[0].items():
        assert torch.equal(value, saved[key.replace(".default", "")]), key


def test_main_job_reports_out_of_domain_sets(tmp_path, tiny_model_dir):
    """eval.out_of_domain: each set evaluated for start, SFT and RLVR by its own task's grader, compared with the
    start, and the report's section says whether any model got worse there."""
    from rlvr.training.main_job import run_main

    other = tmp_path / "other.jsonl"
    other.write_text(
        "".join(
            json.dumps({"id": f"o{i}", "prompt": f"What is {i} plus {i}?", "answer": str(2 * i)}) + "\n"
            for i in range(40)
        )
    )
    ood = f"[{{name: jsonl, settings: {{path: {other}}}, label: doubling, limit: 4}}]"
    cfg = tiny_config(
        tmp_path,
        **{
            "model.name": str(tiny_model_dir),
            "output_dir": str(tmp_path / "main"),
            "train.steps": 1,
            "eval.n": 2,
            "eval.ks": "[1, 2]",
            "eval.limit": 4,
            "sft.epochs": 1,
            "eval.out_of_domain": ood,
        },
    )
    run_main(cfg, quiet=True)
    root = tmp_path / "main"
    compare = json.loads((root / "compare-ood-doubling.json").read_text())
    assert compare["models"] == ["start", "sft", "rlvr"]
    for name in ("start", "sft", "rlvr"):
        summary = json.loads((root / "eval" / "ood-doubling" / name / "summary.json").read_text())
        assert summary["setup"]["task"] == "jsonl" and summary["setup"]["reward"]["terms"][0]["kind"] == "math"
        assert compare["accuracy"][name]["all"]["value"] == pytest.approx(summary["overall"]["pass@k"]["1"]["value"])
    report = (root / "report.md").read_text()
    assert "## Out of domain" in report and "### doubling" in report
    assert "doubling: no model worse" in report or "**doubling: worse out of domain**" in report


def test_a_bad_out_of_domain_set_is_refused_before_anything_runs(tmp_path, tiny_model_dir):
    from rlvr.config import ConfigError
    from rlvr.training.main_job import run_main

    cfg = tiny_config(
        tmp_path,
        **{
            "model.name": str(tiny_model_dir),
            "output_dir": str(tmp_path / "main"),
            "eval.out_of_domain": "[{name: champ, splitt: heldout}]",
        },
    )
    with pytest.raises(ConfigError, match=r"eval.out_of_domain\[0\].splitt: unknown key; choose from name, settings"):
        run_main(cfg, quiet=True)
    cfg["eval"]["out_of_domain"] = [{"name": "nope"}]
    with pytest.raises(ConfigError, match="eval.out_of_domain 'nope': task.name: unknown task 'nope'; choose from"):
        run_main(cfg, quiet=True)
    assert not (tmp_path / "main").exists()


def test_the_reading_is_one_sentence_per_model_with_its_clauses_joined():
    from rlvr.training.main_job import HELD_OUT_NOTE, reading

    result = {
        "baseline": "start",
        "diffs": {
            "sft": {"1-digit": {"verdict": "better"}, "all": {"verdict": "better"}},
            "rlvr": {"1-digit": {"verdict": "worse"}, "2-digit": {"verdict": "inside the noise"}},
        },
    }
    assert reading(result) == (
        "sft vs start: better outside the 95% noise on 1-digit, all. "
        "rlvr vs start: no band better outside the noise; worse on 1-digit; inside the noise on 2-digit."
        + HELD_OUT_NOTE
    )
    assert reading(result, closing="").endswith("inside the noise on 2-digit.")


def test_phase_clock_counts_this_invocations_work_and_names_what_it_read_back():
    from rlvr.training.main_folder import PhaseClock

    clock = PhaseClock()
    assert clock("train rlvr", lambda x: x + 1, 1) == 2
    saved = ["records"], {"setup": {"wall_s": 90.0}, "read_back": True}
    assert clock("eval sft", lambda: saved) is saved and "read_back" not in saved[1]  # the flag is consumed
    clock("eval rlvr", lambda: (["records"], {"setup": {"wall_s": 12.0}}))  # evaluated now: counted
    clock.read_back("train sft")
    assert set(clock.spent) == {"train rlvr", "eval rlvr"} and clock.earlier == {"eval sft": 90.0, "train sft": None}
    assert clock.line(120.0) == (
        "2.0 min (train rlvr 0.0, eval rlvr 0.0) in this invocation; "
        "read back from an earlier one: eval sft (1.5 min then), train sft"
    )
    assert PhaseClock().line(60.0) == "1.0 min"
