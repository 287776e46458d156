"""Issue 50, "signal, checked and said": a run whose groups carry no learning signal says so at its first step, with
the cause and the remedies; warns after WARN_STREAK steps in a row; stops after train.stop_without_signal; and its
report says it. Runs use the tiny random model on tasks whose verdicts the data forces: numeric golds under the
boxed grader (the random model never boxes: all no_answer), and a regex grader that reads the whole completion
against a gold pattern that never matches (all wrong) or always does (all correct)."""

import inspect
import json

import pytest

from conftest import make_tiny_llama
from rlvr.cli import main
from rlvr.config import CHOICES, DEFAULTS, ConfigError, dump, resolve
from rlvr.evaluation.learning_signal import (
    WARN_STREAK,
    diagnose,
    run_signal_warning,
    signal_warning,
    streaks,
    trailing_streak,
)
from rlvr.training.loop import train

HEAD = (
    "no group's samples got different rewards (groups/nonzero_var_frac 0), so every advantage was 0 and the step "
    "made no update"
)
FORMAT_FIX = (
    "Fix the prompt or the grading before anything else: ask for the format in task.settings.system_prompt, or show "
    "it (task.settings.demo on jsonl and hub: auto, one solved training problem, or a worked exchange of your own; "
    "task.settings.one_shot: true on arithmetic); "
    "fine-tune on worked solutions first (rlvr sft with sft.source: reference, the traces in the data's "
    "sft.reference_field column or written by a function of the row, sft.reference, then model.name: that run's "
    "final/merged; train.init_from_sft: true in rlvr run); "
    "grade answers leniently (require_boxed: false on the correctness term of reward.terms: the final answer is then "
    "read even outside the format); a format reward (a reward.terms term of kind boxed_format) pays only answers "
    "already in the format, so it cannot start from none"
)
NO_ANSWER = (
    f"{HEAD}; 100% of the completions gave no answer: the model never writes the task's answer format "
    f"(a final \\boxed{{...}}). {FORMAT_FIX}"
)
# the same remedies after asking and showing (issue 64: chat rows are used as written, so the settings that add turns
# reach some rows or none, and the advice says what reaches the rows at hand)
AFTER_SHOW = "; fine-tune on worked solutions first " + FORMAT_FIX.split("; fine-tune on worked solutions first ")[1]
CHAT_FIX = (
    "Fix the prompt or the grading before anything else: ask for the format in task.settings.system_prompt (the rows "
    "without a system turn of their own get it), or show it in the rows' own turns, a solved user/assistant exchange "
    "before the question (chat rows are used as written: task.settings.demo does not reach them)" + AFTER_SHOW
)
OWN_SYSTEM_FIX = (
    "Fix the prompt or the grading before anything else: ask for the format in the rows' own system turns (chat rows "
    "with a system turn of their own are used as written: task.settings.system_prompt and task.settings.demo do not "
    "reach them), or show it in the rows' own turns, a solved user/assistant exchange before the question; where "
    "their system turns ask for another answer format, grade that one (task.settings.answer_format: boxed or tags)"
    + AFTER_SHOW
)
ALL_WRONG = (
    f"{HEAD}; none of the completions was correct (100% wrong, 0% no answer): the problems are too hard for the "
    "model. Train on easier bands (curriculum: {kind: fixed, weights: {<band>: <share>}}, or {kind: adaptive} to "
    "follow the bands it can solve) or easier problems, and draw more samples per prompt (rollout.group_size) so "
    "that a rare success lands in a group"
)
ALL_RIGHT = (
    f"{HEAD}; every completion was correct: the problems are too easy for the model, there is nothing left to learn "
    "from them. Train on harder bands (curriculum weights toward them) or harder problems"
)


ALL_ERROR = (
    f"{HEAD}; 100% of the completions got a fault verdict (100% error), which earns nothing whatever the completion "
    "says: error verdicts are the grader failing (a reward function that raises or returns no number, a grader that "
    "cannot run). Not the data's difficulty: fix the grading before anything else (samples.jsonl gives each fault's "
    "detail)"
)


def figures(nzv, correct=0.0, wrong=0.0, no_answer=0.0, step=0, error=0.0) -> dict:
    return {
        "step": step,
        "groups/nonzero_var_frac": nzv,
        "verdict/correct_frac": correct,
        "verdict/wrong_frac": wrong,
        "verdict/no_answer_frac": no_answer,
        "verdict/error_frac": error,
    }


@pytest.mark.parametrize(
    "row, answer_format, message",
    [
        (figures(0.25, correct=0.1, no_answer=0.9), "boxed", None),  # one informative group is signal
        (figures(0.0, no_answer=1.0), "boxed", NO_ANSWER),
        (figures(0.0, wrong=1.0), "boxed", ALL_WRONG),
        (figures(0.0, correct=1.0), "boxed", ALL_RIGHT),
        # mostly no_answer is the format's fault before the answers' difficulty
        (
            figures(0.0, wrong=0.25, no_answer=0.75),
            "tags",
            f"{HEAD}; 75% of the completions gave no answer: the model never writes the task's answer format "
            f"(a final <answer>...</answer>). {FORMAT_FIX}",
        ),
        (
            figures(0.0, wrong=0.6, no_answer=0.4),
            "boxed",
            ALL_WRONG.replace("(100% wrong, 0% no answer)", "(60% wrong, 40% no answer)"),
        ),
        # code: no lenient reading or format term to offer, only the prompt and reference traces
        (
            figures(0.0, no_answer=1.0),
            "code",
            f"{HEAD}; 100% of the completions gave no answer: the model never writes the task's answer format "
            "(one ```python block). Fix the prompt or the grading before anything else: ask for the format in "
            "task.settings.system_prompt; fine-tune on worked solutions first (rlvr sft with sft.source: reference, "
            "the traces in the data's sft.reference_field column or written by a function of the row, "
            "sft.reference, then model.name: that run's final/merged; train.init_from_sft: true in rlvr run)",
        ),
        # half the prompts always solved, half never: no group varies, yet the task is neither too hard nor too easy
        (
            figures(0.0, correct=0.5, wrong=0.5),
            "boxed",
            f"{HEAD}; 50% of the completions were correct, but each prompt's samples were all right or all wrong: "
            "draw more samples per prompt (rollout.group_size) or sample at a higher rollout.temperature",
        ),
        ({"step": 0, "reward/mean": 0.0}, "boxed", None),  # a line without the figure: nothing to say
        # issue 64: a grader that fails on every completion is the cause, not the data ("too hard")
        (figures(0.0, error=1.0), "boxed", ALL_ERROR),
        # faults first, before the format: a grader that failed did not read the answer at all
        (
            figures(0.0, error=0.5, no_answer=0.25, wrong=0.25) | {"verdict/invalid_gold_frac": 0.0},
            "boxed",
            ALL_ERROR.replace("100% of", "50% of").replace("(100% error)", "(50% error)"),
        ),
        (
            figures(0.0, error=0.3) | {"verdict/invalid_gold_frac": 0.4},
            "boxed",
            f"{HEAD}; 70% of the completions got a fault verdict (40% invalid_gold, 30% error), which earns nothing "
            "whatever the completion says: invalid_gold verdicts are gold answers the grader cannot read (fix the "
            "data's gold column, or grade with a kind that reads it); error verdicts are the grader failing (a reward "
            "function that raises or returns no number, a grader that cannot run). Not the data's difficulty: fix the "
            "grading before anything else (samples.jsonl gives each fault's detail)",
        ),
        # a minority of faults is not the cause, but the share is said
        (
            figures(0.0, wrong=0.75, error=0.25),
            "boxed",
            ALL_WRONG.replace("(100% wrong, 0% no answer)", "(75% wrong, 0% no answer, 25% error)"),
        ),
    ],
)
def test_diagnosis_of_one_step(row, answer_format, message):
    assert diagnose(row, answer_format) == message


def test_the_no_answer_advice_names_what_reaches_the_rows():
    """Text rows: the task's system prompt and demonstration. Chat rows: the system prompt reaches those without a
    system turn, the demonstration none. Chat rows with their own system turn: neither; their own turns, or the answer
    format their system turns ask for. The code task's advice likewise, without a demonstration to offer."""
    row = figures(0.0, no_answer=1.0)
    no_answer = f"{HEAD}; 100% of the completions gave no answer: the model never writes the task's answer format "
    assert diagnose(row, "boxed", "text") == NO_ANSWER
    assert diagnose(row, "boxed", "chat") == no_answer + f"(a final \\boxed{{...}}). {CHAT_FIX}"
    assert diagnose(row, "boxed", "own_system") == no_answer + f"(a final \\boxed{{...}}). {OWN_SYSTEM_FIX}"
    assert diagnose(row, "code", "own_system") == no_answer + (
        "(one ```python block). Fix the prompt or the grading before anything else: ask for the format in the rows' "
        "own system turns (chat rows with a system turn of their own are used as written: "
        "task.settings.system_prompt and task.settings.demo do not reach them); fine-tune on worked solutions first "
        "(rlvr sft with sft.source: reference, the traces in the data's sft.reference_field column or written by a "
        "function of the row, sft.reference, then model.name: that run's final/merged; train.init_from_sft: true in "
        "rlvr run)"
    )
    assert diagnose(figures(0.0, wrong=1.0), "boxed", "own_system") == ALL_WRONG  # only the format advice differs


def test_a_run_on_chat_rows_with_their_own_system_turn_advises_those_turns(tmp_path, model_dir, capsys):
    """A TRL user's rows (system turn asking for <answer> tags) under the default boxed grader: every completion is
    no_answer, and the step-0 warning, signal.json and the report advise the rows' own turns or answer_format, not
    task.settings.system_prompt and demo, which reach none of them."""
    cfg = forced_config(tmp_path, None, **{"model.name": model_dir, "train.steps": 1})
    system = {"role": "system", "content": "Think, then give the answer in <answer></answer>."}
    for name, add in (("train", 1), ("heldout", 2)):  # the same problems as forced_config's, as such chat rows
        rows = [
            {"id": f"{name}{i}", "prompt": [system, {"role": "user", "content": f"What is {i} + {add}?"}],
             "answer": str(i + add)}
            for i in range(20)
        ]  # fmt: skip
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "c.yaml").write_text(dump(cfg))
    run = tmp_path / "run"
    assert main(["train", str(tmp_path / "c.yaml")]) == 0
    said = f"{HEAD}; 100% of the completions gave no answer: the model never writes the task's answer format (a final "
    said += f"\\boxed{{...}}). {OWN_SYSTEM_FIX}"
    assert lines(capsys) == [f"WARNING: no learning signal at step 0: {said}."]
    assert json.loads((run / "signal.json").read_text())["prompts"] == "own_system"
    report = (run / "report.md").read_text()
    assert f"No learning signal in step 0 (1 of the run's 1 steps in a row): {said}." in report


def test_the_answer_format_is_code_where_a_term_s_kind_runs_tests():
    """answer_format_of asks each term's kind entry (grades tests: python_tests, stdio), not a list of code kinds; a
    plug-in reference is not imported (an old run's may be gone) and reads as an answer grader."""
    from rlvr.evaluation.learning_signal import answer_format_of
    from rlvr.verifiers.registry import KINDS, runs_tests

    assert [kind for kind in KINDS if runs_tests(kind)] == ["python_tests", "stdio"]
    assert answer_format_of({}, [{"kind": "math"}, {"kind": "stdio"}]) == "code"
    assert answer_format_of({"answer_format": "tags"}, [{"kind": "math"}]) == "tags"
    assert answer_format_of({}, [{"kind": "gone.module:Grader"}]) == "boxed"
    KINDS.add("tests_too", KINDS.get("python_tests"), "a test's code kind")
    try:
        assert answer_format_of({}, [{"kind": "tests_too"}]) == "code"  # a new entry: no second list to edit
    finally:
        KINDS.remove("tests_too")


def test_the_remedies_name_settings_rlvr_has():
    from rlvr.prompts.curriculum import CURRICULA
    from rlvr.tasks.arithmetic import ArithmeticTask
    from rlvr.tasks.hub import load_hub_task
    from rlvr.tasks.jsonl import JsonlTask
    from rlvr.verifiers.registry import KINDS

    assert {"system_prompt", "demo"} <= set(inspect.signature(JsonlTask).parameters)
    assert "demo" in inspect.signature(load_hub_task).parameters
    assert "one_shot" in inspect.signature(ArithmeticTask).parameters
    assert "reference" in CHOICES["sft.source"] and "reference_field" in DEFAULTS["sft"]
    assert "init_from_sft" in DEFAULTS["train"] and {"group_size", "temperature"} <= set(DEFAULTS["rollout"])
    assert "require_boxed" in KINDS.get("math").settings and "boxed_format" in KINDS
    assert CURRICULA.get("fixed")[1] == ("weights", "window") and "adaptive" in CURRICULA


def test_streaks_and_the_report_line():
    rows = [figures(0.5, step=0), *(figures(0.0, no_answer=1.0, step=s) for s in (1, 2, 3)), figures(0.5, step=4)]
    assert streaks(rows) == [(1, 3)] and trailing_streak(rows) == 0 and trailing_streak(rows[:4]) == 3
    assert signal_warning(rows) == f"No learning signal in steps 1-3 (3 of the run's 5 steps in a row): {NO_ANSWER}."
    assert signal_warning(rows[:3]) is None  # two in a row of three: below WARN_STREAK
    assert WARN_STREAK == 3
    # a run shorter than WARN_STREAK is warned about when none of its steps had signal
    assert signal_warning([figures(0.0, wrong=1.0)]) == (
        f"No learning signal in step 0 (1 of the run's 1 steps in a row): {ALL_WRONG}."
    )


def forced_config(tmp_path, gold: str | None, **over) -> dict:
    """20 problems to train on and 20 held out; gold None: numeric golds under the task's own boxed grader; else a regex term reading the whole
    completion against `gold` as a pattern."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    for name, add in (("train", 1), ("heldout", 2)):
        rows = [
            {"id": f"{name}{i}", "prompt": f"What is {i} + {add}?", "answer": gold or str(i + add)} for i in range(20)
        ]
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    sets = {
        "output_dir": tmp_path / "run",
        "task.name": "jsonl",
        "task.settings": f"{{splits: {{train: {tmp_path / 'train.jsonl'}, heldout: {tmp_path / 'heldout.jsonl'}}}}}",
        "reward.workers": 0,
        "rollout.backend": "hf",
        "rollout.dtype": "float32",
        "rollout.prompts_per_step": 2,
        "rollout.group_size": 2,
        "rollout.max_new_tokens": 4,
        "train.micro_batch_size": 4,
        "log.samples_every": 0,
        "log.checkpoint_every": 0,
        "model.lora.r": 4,
        "model.save_merged": "false",
        **over,
    }
    cfg = resolve(None, [f"{k}={v}" for k, v in sets.items()])
    if gold is not None:
        cfg["reward"]["terms"] = [
            {"name": "whole", "kind": "regex", "weight": 1.0, "pattern": "(?s)^(.*)", "gold_is_pattern": True}
        ]
    return cfg


def lines(capsys) -> list[str]:
    return [x for x in capsys.readouterr().err.splitlines() if x.startswith("WARNING")]


def test_a_task_the_model_never_answers_says_so_at_step_0_and_stops(tmp_path, model_dir, capsys):
    cfg = forced_config(tmp_path, None, **{"model.name": model_dir, "train.steps": 5, "train.stop_without_signal": 2})
    (tmp_path / "c.yaml").write_text(dump(cfg))
    run = tmp_path / "run"
    assert main(["train", str(tmp_path / "c.yaml")]) == 1  # stopped on purpose
    assert lines(capsys) == [
        f"WARNING: no learning signal at step 0: {NO_ANSWER}.",
        "WARNING: stopping at step 2: no learning signal in steps 0-1 (2 in a row, train.stop_without_signal = 2); "
        f"the checkpoint and final model of step 2 are saved in {run}. {NO_ANSWER}.",
    ]
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [(r["step"], r["groups/nonzero_var_frac"], r["verdict/no_answer_frac"]) for r in rows] == [
        (0, 0.0, 1.0),
        (1, 0.0, 1.0),
    ]
    assert (run / "checkpoints" / "step-2" / "manifest.json").exists() and (run / "final" / "adapter").exists()
    record = json.loads((run / "signal.json").read_text())
    assert (record["stopped_at"], [s["step"] for s in record["said"]]) == (2, [0, 1])
    assert run_signal_warning(run) == f"No learning signal in steps 0-1 (2 of the run's 2 steps in a row): {NO_ANSWER}."


def test_an_impossible_task_warns_after_three_steps_and_never_stops_at_0(tmp_path, tokenizer, capsys):
    cfg = forced_config(tmp_path, "(?!)", **{"train.steps": 4, "train.stop_without_signal": 0})
    run = train(cfg, policy=(make_tiny_llama(len(tokenizer)), tokenizer), quiet=True)
    assert lines(capsys) == [
        f"WARNING: no learning signal at step 0: {ALL_WRONG}.",
        f"WARNING: no learning signal in steps 0-2 (3 in a row; train.stop_without_signal = 0 never stops it): "
        f"{ALL_WRONG}.",
    ]
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [(r["step"], r["verdict/wrong_frac"]) for r in rows] == [(0, 1.0), (1, 1.0), (2, 1.0), (3, 1.0)]
    assert json.loads((run / "signal.json").read_text())["stopped_at"] is None


def test_a_solved_task_stops_after_the_streak_even_across_a_resume(tmp_path, tokenizer, capsys):
    cfg = forced_config(tmp_path, "(?s).*", **{"train.steps": 2, "train.stop_without_signal": 3})
    run = train(cfg, policy=(make_tiny_llama(len(tokenizer)), tokenizer), quiet=True)
    assert lines(capsys) == [f"WARNING: no learning signal at step 0: {ALL_RIGHT}."]
    cfg["train"]["steps"] = 6
    train(cfg, resume=True, allow_config_change=True, policy=(make_tiny_llama(len(tokenizer)), tokenizer), quiet=True)
    # steps 0-1 before the resume count: the third in a row (step 2) stops the run there
    assert lines(capsys) == [
        "WARNING: stopping at step 3: no learning signal in steps 0-2 (3 in a row, train.stop_without_signal = 3); "
        f"the checkpoint and final model of step 3 are saved in {run}. {ALL_RIGHT}."
    ]
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [(r["step"], r["verdict/correct_frac"]) for r in rows] == [(0, 1.0), (1, 1.0), (2, 1.0)]
    assert (run / "checkpoints" / "step-3" / "manifest.json").exists()
    assert json.loads((run / "signal.json").read_text())["stopped_at"] == 3


def test_a_grader_that_fails_is_named_at_step_0_with_each_faults_detail(tmp_path, tokenizer, capsys, monkeypatch):
    """Issue 64: a trl_reward term whose function fails on every completion warned "too hard: train on easier
    bands". The step-0 line names the error verdicts and their share; samples.jsonl gives each one's detail."""
    (tmp_path / "failing_rewards.py").write_text(
        "def needs_a_column(prompts, completions, difficulty, **kwargs):\n    return [1.0 for _ in completions]\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    cfg = forced_config(tmp_path, None, **{"train.steps": 1, "log.samples_every": 1})
    cfg["reward"]["terms"] = [{"name": "theirs", "kind": "trl_reward", "func": "failing_rewards:needs_a_column"}]
    run = train(cfg, policy=(make_tiny_llama(len(tokenizer)), tokenizer), quiet=True)
    assert lines(capsys) == [f"WARNING: no learning signal at step 0: {ALL_ERROR}."]
    samples = [json.loads(x) for x in (run / "samples.jsonl").read_text().splitlines()]
    assert {(s["status"], s["detail"]) for s in samples} == {
        (
            "error",
            "failing_rewards:needs_a_column: TypeError: needs_a_column() missing 1 required positional argument: "
            "'difficulty'",
        )
    }


def test_the_setting_is_checked_and_listed():
    assert DEFAULTS["train"]["stop_without_signal"] == 10
    with pytest.raises(ConfigError) as e:
        resolve(None, ["train.stop_without_signl=3"])
    assert ", steps, stop_without_signal, time_budget_min" in str(e.value)
    with pytest.raises(ConfigError, match=r"config key 'train.stop_without_signal' = -1; must be >= 0$"):
        resolve(None, ["train.stop_without_signal=-1"])


def test_the_main_jobs_report_says_it_first(tmp_path, model_dir):
    from rlvr.training.main_job import run_main

    over = {"model.name": model_dir, "train.steps": 2, "eval.n": 1, "eval.ks": "[1]", "eval.limit": 2}
    cfg = forced_config(tmp_path, None, **over, **{"eval.greedy": "false", "eval.out_of_domain": "[]"})
    run_main({**cfg, "sft": {**cfg["sft"], "epochs": 1}}, quiet=True)
    report = (tmp_path / "run" / "report.md").read_text()
    top = report.split("## What was run")[0].splitlines()  # the warnings under the title (contention may be one)
    assert top[0] == "# rlvr run report"
    assert f"> **Warning.** No learning signal in steps 0-1 (2 of the run's 2 steps in a row): {NO_ANSWER}." in top
