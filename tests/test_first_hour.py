"""Issue 35, what a new user hit in the first hour, each with the exact command: one-line errors (exit 2, nothing
written), `--resume RUN_DIR` alone, docs/your-data.md executed on the tiny model, the reward gaps, the recipe
mappings and the run's artefacts."""

import json
import re
import shlex
from pathlib import Path

import pytest

from rlvr.cli import main
from rlvr.config import RewardConfig
from rlvr.integrations.trl import reward_funcs
from rlvr.integrations.trl_recipe import convert
from rlvr.tasks.base import Problem
from rlvr.verifiers.compose import build_reward
from rlvr.verifiers.math import MathVerifier

DOC = Path(__file__).resolve().parent.parent / "docs" / "your-data.md"
# what makes the doc's commands run in seconds on the tiny model: the same commands, smaller
TINY = [
    "rollout.prompts_per_step=2",
    "rollout.group_size=4",
    "rollout.max_new_tokens=6",
    "reward.workers=0",
    "train.steps=2",
    "model.lora.r=4",
]


def _err(capsys) -> str:
    return capsys.readouterr().err.strip()


@pytest.mark.parametrize(
    "yaml_text, sets, message",
    [
        (
            "train:\n  lr: 1e-5\n  steps: [\n",
            [],
            "not valid YAML (expected the node content, but found '<stream end>' at line 4, column 1)",
        ),
        (
            "",
            ["task.settings.splits={train: a"],
            "--set 'task.settings.splits={train: a': not valid YAML (expected ',' or '}', but got '<stream end>' at line 1, column 10)",
        ),
        ("", ["train.steps=-3"], "config key 'train.steps' = -3; must be >= 1"),
        ("", ["train.lr=-1e-5"], "config key 'train.lr' = -1e-05; must be > 0"),
        ("", ["rollout.top_p=1.5"], "config key 'rollout.top_p' = 1.5; must be > 0 and <= 1"),
        (
            "",
            ["task.name=jsonl", "task.settings.pth=train.jsonl"],
            "task.settings.pth: not a setting of task 'jsonl'; its settings: path, splits, system_prompt, answer_form, answer_format, demo, prompt_field, answer_field, band_field (after changing task.name on a preset, give the settings whole: --set 'task.settings={...}')",
        ),
        (
            "",
            ["task.name=jsonl", "task.settings.path=nothere.jsonl"],
            (
                "jsonl task: data file nothere.jsonl not found (a relative path is read from the working directory, not "
                "the config's)"
            ),
        ),
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, monkeypatch, capsys, yaml_text, sets, message):
    monkeypatch.chdir(tmp_path)
    args = ["train"] + (["bad.yaml"] if yaml_text else []) + sum((["--set", s] for s in sets), [])
    if yaml_text:
        Path("bad.yaml").write_text(yaml_text)
    assert main(args + ["--output-dir", "run"]) == 2
    err = _err(capsys)
    assert err.endswith(message) and "\n" not in err
    assert not Path("run").exists()


def test_a_row_without_gold_names_the_accepted_columns(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    Path("nogold.jsonl").write_text('{"prompt": "1+1?", "target": "2"}\n')
    assert (
        main(["train", "--set", "task.name=jsonl", "--set", "task.settings.path=nogold.jsonl", "--output-dir", "r"])
        == 2
    )
    assert _err(capsys).endswith(
        "no gold answer (give one of the columns answer, gold, solution, ground_truth, final_answer) and no tests"
    )


def test_scientific_notation_in_yaml_is_a_float(tmp_path):
    from rlvr.config import resolve

    (tmp_path / "c.yaml").write_text("train:\n  lr: 1e-5\nsft:\n  lr: 2E-4\n")
    cfg = resolve(str(tmp_path / "c.yaml"), ["rollout.temperature=7e-1"])
    assert (cfg["train"]["lr"], cfg["sft"]["lr"], cfg["rollout"]["temperature"]) == (1e-5, 2e-4, 0.7)


def test_ctrl_c_during_start_up_leaves_no_directory(tmp_path, model_dir, monkeypatch, capsys):
    import rlvr.training.loop as loop

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(loop, "setup", interrupted)  # Ctrl-C while the model loads
    run = tmp_path / "run"
    assert main(["train", "--set", f"model.name={model_dir}", "--output-dir", str(run)]) == 130
    assert _err(capsys) == "rlvr train: interrupted"
    assert not run.exists()


def _doc_blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", DOC.read_text(), re.S)


def _run_doc_command(line: str, model_dir) -> int:
    """One command of the doc as written, with the tiny model for the default one and TINY's sizes added to
    a fresh train (a resume reads them from the run)."""
    args = shlex.split(line.replace("smollm2-135m-instruct", str(model_dir)))
    assert args[0] == "rlvr"
    args = args[1:]
    if args[0] == "train" and "--resume" not in args:
        args += sum((["--set", s] for s in [f"model.name={model_dir}", *TINY]), [])
    if args[0] == "train" and "--resume" in args:
        args = [a.replace("train.steps=60", "train.steps=3") for a in args]
    if args[0] == "eval":
        args += ["--max-new-tokens", "6", "--quiet"]
    return main(args)


def test_your_data_doc_runs_as_written(tmp_path, monkeypatch, model_dir):
    """docs/your-data.md: the data files and config as shown, then the commands of its first and last sections."""
    monkeypatch.chdir(tmp_path)
    rows = _doc_blocks("jsonl")[0]
    Path("train.jsonl").write_text(rows)
    Path("heldout.jsonl").write_text(
        rows.replace('"id": "q', '"id": "h')
        .replace("17 + 25", "18 + 24")
        .replace("6 rows of 7", "7 rows of 6")
        .replace("3/4 of 12", "three quarters of 12")
    )
    Path("my-data.yaml").write_text(_doc_blocks("yaml")[0])
    # the middle block, the own-tool example's, trains the real model for minutes: benchmarks/own_tool_experiment.sh
    own_data, _own_tool, _base_model, resume = _doc_blocks("bash")  # the base model's: test_prompts_plain.py
    for line in own_data.strip().splitlines():
        assert _run_doc_command(line, model_dir) == 0, line
    config = (tmp_path / "runs/mine/config.yaml").read_text()
    assert f"train: {tmp_path / 'train.jsonl'}" in config  # stored absolute
    compare = json.loads(Path("runs/mine-eval/compare/compare.json").read_text())
    assert compare["bands"] == ["all"] and compare["models"] == ["start", "rlvr"]
    summary = Path("runs/mine-eval/rlvr/summary.md").read_text()
    assert summary.count("| all |") + summary.count("| **all** |") == 2  # once per table
    for line in resume.strip().splitlines():
        assert _run_doc_command(line, model_dir) == 0, line
    steps = [json.loads(x)["step"] for x in Path("runs/mine/metrics.jsonl").read_text().splitlines()]
    assert steps == [0, 1, 2]


def test_audit_math_reports_the_unevaluated_expression_class(capsys):
    assert main(["audit", "--verifier", "math"]) == 1
    out = capsys.readouterr().out
    assert re.search(r"hack\s+unevaluated_expression\s+11\s+11\s+100\.0%", out)
    assert "false-accept rate: 16.9% of 65 hacks" in out


def test_audit_of_a_jsonl_file(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    Path("train.jsonl").write_text('{"prompt": "8 - 3?", "answer": "5"}\n{"prompt": "6/8?", "answer": "3/4"}\n')
    assert main(["audit", "--task", "jsonl", "--set", "task.settings.path=train.jsonl"]) == 0
    assert "false-accept rate: 0.0% of 65 hacks" in capsys.readouterr().out


def test_numeric_golds_get_the_number_form(tmp_path):
    from rlvr.tasks import load_task

    (tmp_path / "n.jsonl").write_text('{"prompt": "a", "answer": "5"}\n{"prompt": "b", "answer": "3/4"}\n')
    (tmp_path / "m.jsonl").write_text('{"prompt": "a", "answer": "5"}\n{"prompt": "b", "answer": "x^2"}\n')
    assert load_task("jsonl", path=str(tmp_path / "n.jsonl")).answer_form == "number"
    assert load_task("jsonl", path=str(tmp_path / "m.jsonl")).answer_form == "math"
    task = load_task("jsonl", splits={"train": str(tmp_path / "n.jsonl")})
    reward = build_reward(RewardConfig(terms=task.grader, workers=0))
    problems = [Problem("1", "8 - 3?", "5"), Problem("2", "6/8?", "3/4")]
    assert reward([r"\boxed{8-3}", r"\boxed{\frac{6}{8}}"], problems).verdicts[0].status == "wrong"


def test_hedge_in_prose_before_a_single_box_under_strict():
    p = Problem("1", "q", "3")
    text = r"The answer is 3 or 4, final: \boxed{3}"
    assert MathVerifier(hedging="strict").score(text, p).status == "multiple_answers"
    assert MathVerifier(hedging="last").score(text, p).status == "correct"
    assert MathVerifier(hedging="strict").score(r"We add 1 and 2 to get \boxed{3}", p).status == "correct"


def test_a_fault_verdict_earns_nothing(tmp_path, capsys):
    rows = tmp_path / "in.jsonl"
    rows.write_text(
        json.dumps({"completion": r"\boxed{5}", "answer": "\\frac{1}{"})
        + "\n"
        + json.dumps({"completion": r"\boxed{5}", "answer": "5"})
        + "\n"
    )
    assert main(["verify", "--task", "arithmetic", "--input", str(rows), "--output", str(tmp_path / "out.jsonl")]) == 0
    out = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [(r["status"], r["reward"]) for r in out] == [("invalid_gold", 0.0), ("correct", 1.1)]
    terms = [{"kind": "math"}, {"name": "format", "kind": "boxed_format", "weight": 0.1}]
    reward = build_reward(RewardConfig(terms=terms, workers=0))
    result = reward([r"\boxed{5}"], [Problem("1", "q", "\\frac{1}{")])
    assert (result.total, result.terms["format"]) == ([0.0], [0.0])


def test_converted_accuracy_refuses_a_truncated_reply_repeating_a_number():
    conv = convert(
        {"reward_funcs": ["accuracy", "format"], "reward_weights": [1.0, 0.1], "report_to": ["wandb", "comet_ml"]}
    )
    assert conv.config["reward"]["terms"][0] == {"name": "accuracy", "kind": "math", "weight": 1.0}
    assert any(n.startswith("accuracy -> rlvr's math grader, which reads only the final answer") for n in conv.notes)
    assert conv.config["log"]["report_to"] == ["wandb"]
    assert ("report_to: comet_ml", "not one of rlvr's trackers (tensorboard, mlflow, trackio, wandb)") in conv.unmapped
    funcs, _ = reward_funcs(conv.config, workers=0)
    truncated = "<think>Ana starts with 12 apples, then"  # cut by the length limit: no <answer> tag
    question = "Ana starts with 12 apples and gives none away. How many apples does she have?"
    assert funcs[0](prompts=[question], completions=[truncated], solution=["12"]) == [0.0]  # TRL's own: 1.0
    old, _ = reward_funcs({"terms": [{"kind": "math", "require_boxed": False, "answer_format": "tags"}]}, workers=0)
    assert old[0](prompts=[question], completions=[truncated], solution=["12"]) == [1.0]  # the former mapping


def test_trl_reward_functions_gold_columns():
    funcs, _ = reward_funcs(None, workers=0)
    assert funcs[0](prompts=["p"], completions=[r"\boxed{5}"], solution=[None], ground_truth=["5"]) == [1.0]
    with pytest.raises(
        ValueError,
        match=r"^no gold column: give the dataset one of the columns answer, gold, "
        r"solution, ground_truth, final_answer \(columns given: target\)$",
    ):
        funcs[0](prompts=["p"], completions=[r"\boxed{5}"], target=["5"])


def test_merged_model_in_its_own_dtype_or_skipped(tmp_path, model_dir, tokenizer):
    """The merged model is saved in the dtype its weights are stored in; save_merged: false keeps the adapter alone
    and rlvr eval of the run merges it onto the run's model."""
    import torch
    from safetensors import safe_open

    from rlvr.policy.load import EMBEDDED_DTYPE, stored_dtype

    assert EMBEDDED_DTYPE["smollm2-135m-instruct"] == "bfloat16"
    assert stored_dtype(str(model_dir), str(model_dir)) == "float32"
    cfg_dir = tmp_path / "bf16-model"
    from conftest import make_tiny_llama

    make_tiny_llama(len(tokenizer)).to(torch.bfloat16).save_pretrained(cfg_dir)
    tokenizer.save_pretrained(cfg_dir)
    run = tmp_path / "run"
    sets = [f"model.name={cfg_dir}", *TINY, "train.steps=1"]
    assert main(["train", *sum((["--set", s] for s in sets), []), "--output-dir", str(run)]) == 0
    with safe_open(run / "final/merged/model.safetensors", "pt") as f:
        assert f.get_tensor("model.norm.weight").dtype == torch.bfloat16
    bare = tmp_path / "bare"
    sets = [f"model.name={model_dir}", *TINY, "train.steps=1", "model.save_merged=false"]
    assert main(["train", *sum((["--set", s] for s in sets), []), "--output-dir", str(bare)]) == 0
    assert sorted(p.name for p in (bare / "final").iterdir()) == ["README.md", "adapter", "prompt_template.json"]
    assert main(["eval", "--model", str(bare), "--n", "1", "--limit", "4", "--max-new-tokens", "4", "--quiet"]) == 0
    summary = json.loads((bare / "eval/heldout/summary.json").read_text())
    assert summary["overall"]["n_problems"] == 4


def test_no_warnings_at_a_runs_first_step(tmp_path, model_dir, recwarn):
    run = tmp_path / "run"
    sets = [f"model.name={model_dir}", *TINY, "train.steps=1"]
    assert main(["train", *sum((["--set", s] for s in sets), []), "--output-dir", str(run)]) == 0
    messages = [str(w.message) for w in recwarn]
    noisy = ("lr_scheduler.step()", "is_gradient_checkpointing", "past_key_values")
    assert not [m for m in messages if any(n in m for n in noisy)], messages


def test_resume_names_a_run_directory(tmp_path, capsys):
    assert main(["train", "--resume", str(tmp_path)]) == 2
    assert _err(capsys) == f"rlvr train: --resume {tmp_path}: not a run directory (no config.yaml there)"
    (tmp_path / "config.yaml").write_text("seed: 0\n")
    assert main(["train", "--resume", str(tmp_path), "--output-dir", str(tmp_path / "other")]) == 2
    assert _err(capsys) == (
        f"rlvr train: --resume {tmp_path} and --output-dir {tmp_path / 'other'} name different run directories"
    )


def test_a_malformed_set_for_audit_is_one_line(capsys):
    assert main(["audit", "--verifier", "math", "--set", "hedging=[strict"]) == 2
    assert _err(capsys) == (
        "rlvr audit: --set 'hedging=[strict': not valid YAML (expected ',' or ']', but got "
        "'<stream end>' at line 1, column 8)"
    )
