"""demo: auto decided by measurement (rlvr.evaluation.demo_choice): the rule, table-driven; the measurement on a tiny
model pinned both ways (golds written so that the start model's own greedy answers are right in one arm only); the
settings a run records; and the embedded default's arithmetic one_shot: auto."""

import json
import re

import pytest
import torch

from rlvr.config import as_config, resolve
from rlvr.evaluation.demo_choice import choice_markdown, choose_for_config, decide, greedy, measure
from rlvr.prompts.stream import spread_over_bands
from rlvr.sampling import build_sampler
from rlvr.tasks import load_task
from rlvr.tasks.base import task_messages


def arm(correct, fmt):
    return {"correct": correct, "format": fmt, "mean_chars": 100.0}


@pytest.mark.parametrize(
    "demonstration, none, chosen, why",
    [
        (arm(0.50, 1.0), arm(0.25, 1.0), "demonstration", "correctly more often with it (8 against 4)"),
        (arm(0.38, 1.0), arm(0.53, 1.0), "none", "correctly more often without it (8 against 6)"),  # the 0.5B's case
        (
            arm(0.0, 0.9),
            arm(0.0, 0.0),
            "demonstration",
            "in the answer format more often with it (14 against 0)",
        ),  # 135M
        (arm(0.5, 1.0), arm(0.5, 0.5), "demonstration", "in the answer format more often"),
        (arm(0.5, 0.5), arm(0.5, 1.0), "none", "as good without it"),  # more boxes without: the model's own form
        (arm(0.5, 1.0), arm(0.5, 1.0), "none", "as good without it"),  # a tie keeps the model's own form
        (arm(0.0, 0.0), arm(0.0, 0.0), "none", "as good without it"),
    ],
)
def test_the_rule(demonstration, none, chosen, why):
    got, reason = decide({"demonstration": demonstration, "none": none}, 16)
    assert got == chosen and why in reason


def _rows(golds: dict[str, str]) -> list[dict]:
    rows = [{"id": f"q{i:02d}", "prompt": f"Tell me about {i}.", "answer": golds.get(f"q{i:02d}", "x"), "band": "b"}
            for i in range(40)]  # fmt: skip
    # the easiest band's first problem is the demonstration; its trace fixes the shown turn whatever the golds
    rows.append({"id": "a0", "prompt": "Tell me about zero.", "answer": "z", "band": "a", "trace": "Zero. \\boxed{z}"})
    return rows


def _config(tmp_path, golds):
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "data.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in _rows(golds)))
    return as_config(
        resolve(
            None,
            [
                "task.name=jsonl",
                f"task.settings={{path: {path}, answer_form: math}}",
                # the whole completion against the gold as a pattern: a tiny random model's greedy answer is right
                # where the gold is that answer itself
                'reward.terms=[{name: whole, kind: regex, weight: 1.0, pattern: "([\\\\s\\\\S]+)", gold_is_pattern: true}]',
                "reward.workers=0",
                "rollout.max_new_tokens=4",
                "rollout.dtype=float32",
            ],
        )
    )


def _first(text: str) -> str:
    """The gold pattern that only this answer meets (an empty answer: a pattern nothing matches)."""
    return re.escape(text.strip()) if text.strip() else "(?!)"


@pytest.mark.parametrize("winner", ["demonstration", "none"])
def test_the_measurement_keeps_the_arm_the_model_answers_correctly_in(tmp_path, tokenizer, winner):
    from conftest import make_tiny_llama

    model = make_tiny_llama(len(tokenizer))
    with torch.no_grad():  # weights 16x the init's: its greedy answers depend on the prompt (at 1x: "\n\n\n\n")
        for p in model.parameters():
            p.mul_(16 if p.dim() == 2 else 1)
    policy = (model, tokenizer)
    cfg = _config(tmp_path / "probe", {})
    task = load_task(cfg.task.name, **cfg.task.settings)
    assert set(task.demo_options) == {"demonstration", "none"}
    assert task.demo_options["demonstration"][0][1]["content"] == "Zero. \\boxed{z}"  # the trace, shown as written
    sampler = build_sampler(cfg.rollout, policy[0].eval(), tokenizer, prompt_format="chat")
    generate = greedy(sampler, tokenizer, cfg.rollout.max_new_tokens, "chat")
    asked = spread_over_bands(task.problems("train"), 16)
    answers = {
        a: generate([task_messages(task.system_prompt, p, t) for p in asked]) for a, (t, _) in task.demo_options.items()
    }
    golds = {p.id: _first(text) for p, text in zip(asked, answers[winner])}
    loser = "none" if winner == "demonstration" else "demonstration"
    differ = sum(_first(a) != _first(b) for a, b in zip(answers[winner], answers[loser]))
    assert differ > 0  # otherwise the two arms would tie and the test would prove nothing

    cfg = _config(tmp_path / "run", golds)
    settled, choice = choose_for_config(cfg, policy)
    assert choice is not None and choice.chosen == winner
    assert choice.figures[winner]["correct"] == 1.0  # every answer of that arm is its own gold
    assert choice.figures[loser]["correct"] == pytest.approx(1 - differ / len(asked))
    shown = task.demo_options["demonstration"][0]
    assert settled.task.settings["demo"] == (shown if winner == "demonstration" else "none")
    assert load_task(settled.task.name, **settled.task.settings).demo_options == {}  # nothing left to measure
    assert f"**Demonstration (`demo: auto`): {winner}.**" in choice_markdown(choice.to_dict())


def test_measure_on_a_task_with_nothing_to_decide_is_none(tmp_path, tokenizer):
    task = load_task("jsonl", path=str(_write(tmp_path)), demo="none")
    assert task.demo_options == {} and measure(task, lambda chats: [], None) is None


def _write(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in _rows({})))
    return path


def test_arithmetic_one_shot_auto_offers_both_and_records_a_boolean():
    task = load_task("arithmetic", per_band=20, one_shot="auto")
    shown, settings = task.demo_options["demonstration"]
    assert settings == {"one_shot": True} and task.demo_options["none"] == ([], {"one_shot": False})
    assert task.messages(task.problems("train")[0])[1:3] == shown  # unmeasured, auto shows it (as before)
    assert load_task("arithmetic", per_band=20, one_shot=False).messages(task.problems("train")[0])[1]["role"] == "user"
    with pytest.raises(ValueError, match="one_shot 'yes'"):
        load_task("arithmetic", per_band=20, one_shot="yes")


def test_the_reasoning_preset_differs_from_the_default_where_a_model_that_reasons_needs_it():
    from rlvr.training.lifecycle import config_diff

    default, reasoning = resolve("default"), resolve("reasoning")
    changed = set(config_diff(default, reasoning))
    assert {"rollout.max_new_tokens", "algorithm.overlong", "task.settings.one_shot"} <= changed
    assert reasoning["rollout"]["max_new_tokens"] >= 256 and reasoning["task"]["settings"]["one_shot"] == "auto"
    assert reasoning["reward"]["terms"] == default["reward"]["terms"]


def test_rlvr_run_with_a_model_and_a_task_takes_the_reasoning_preset_and_the_task_whole(tmp_path):
    from rlvr.cli import build_parser
    from rlvr.cli.config_args import resume_command
    from rlvr.cli.run import run_config

    argv = ["run", "--model", "m.gguf", "--task", "jsonl", "--set", "task.settings.path=d.jsonl", "--steps", "3"]
    args = build_parser().parse_args(argv)
    cfg = run_config(args)
    assert (
        cfg["model"]["name"] == "m.gguf"
        and cfg["rollout"]["max_new_tokens"] == resolve("reasoning")["rollout"]["max_new_tokens"]
    )
    assert cfg["task"] == {"name": "jsonl", "settings": {"path": "d.jsonl"}}  # not merged with arithmetic's settings
    assert cfg["train"]["steps"] == 3 and as_config(cfg).task.name == "jsonl"
    again = resume_command(args, tmp_path)  # what a signal's message tells the user to run: the same flags
    assert "--model m.gguf --task jsonl" in again and "task.settings.path=d.jsonl" in again
    plain = run_config(build_parser().parse_args(["run"]))
    assert plain["model"]["name"] == "smollm2-135m-instruct" and plain["task"]["settings"]["one_shot"] is True
