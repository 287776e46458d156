"""`<answer>...</answer>` (after `<think>` reasoning) as an alternative to `\\boxed{}`, chosen per task: extraction,
the hedging rules, the format reward, and the task's choice reaching the reward."""

import pytest

from rlvr.config import ConfigError, resolve
from rlvr.verifiers.format import BoxedFormatVerifier, tags_format_check
from rlvr.verifiers.math import MathVerifier
from rlvr.verifiers.simple import ExactMatchVerifier, NumericVerifier

TAGS = MathVerifier(answer_format="tags", timeout_s=5.0)


@pytest.mark.parametrize(
    "completion, gold, status, why",
    [
        ("<think>2+3=5</think>\n<answer>5</answer>", "5", "correct", "plain number in the tag"),
        (
            "<think>maybe \\boxed{3}</think><answer>5</answer>",
            "5",
            "correct",
            "a box inside the reasoning is no answer",
        ),
        ("<think>maybe \\boxed{3}</think><answer>5</answer>", "3", "wrong", "only the answer tag counts"),
        (
            "<think>x</think><answer>\\boxed{\\frac{1}{2}}</answer>",
            "0.5",
            "correct",
            "a box inside the tag is unwrapped",
        ),
        (
            "<answer>The answer is $\\frac{1}{2}$.</answer>",
            "1/2",
            "correct",
            "text in the tag: math-verify's extraction",
        ),
        ("<answer>3 or 5</answer>", "5", "multiple_answers", "a hedge in prose inside the tag"),
        ("<answer>\\boxed{3} or \\boxed{5}</answer>", "5", "multiple_answers", "two boxes in one tag"),
        ("<answer>3</answer> or <answer>5</answer>", "5", "multiple_answers", "two tags joined by 'or'"),
        (
            "<answer>3</answer>\nWait, I made an arithmetic error in step two, so the total is\n<answer>5</answer>",
            "5",
            "correct",
            "self-correction: the last tag after real text",
        ),
        ("<think>long reasoning</think><answer>5", "5", "no_answer", "an unclosed tag is a truncated answer"),
        ("The answer is \\boxed{5}", "5", "no_answer", "a box is not the tags format"),
        ("<answer>2^{2^{2^{2^2}}}</answer>", "5", "timeout", "the guard refuses a power tower in a tag too"),
    ],
)
def test_math_in_answer_tags(completion, gold, status, why):
    assert TAGS.score(completion, gold).status == status, why


def test_boxed_remains_the_default():
    assert MathVerifier().score("<answer>5</answer>", "5").status == "no_answer"
    assert MathVerifier().score("\\boxed{5}", "5").status == "correct"
    with pytest.raises(ValueError, match="choose from boxed, tags"):
        MathVerifier(answer_format="xml")


@pytest.mark.parametrize(
    "completion, reward, why",
    [
        ("<think>\nreasoning\n</think>\n<answer>\n5\n</answer>", 1.0, "the R1 format"),
        ("<answer>5</answer>", 1.0, "reasoning is optional"),
        ("<think>a</think><answer>5</answer><answer>6</answer>", 0.0, "two answer tags"),
        ("<think>a<answer>5</answer>", 0.0, "reasoning never closed"),
        ("<answer>5</answer><think>after</think>", 0.0, "reasoning after the answer"),
        ("<answer>  </answer>", 0.0, "empty answer"),
        ("<answer>5</answer>" + " more" * 60, 0.0, "the answer is not where it ends"),
        ("\\boxed{5}", 0.0, "a box is not the tags format"),
    ],
)
def test_tags_format_reward(completion, reward, why):
    assert tags_format_check(completion).reward == reward, why
    assert BoxedFormatVerifier("tags").score(completion).reward == reward, why


def test_simple_verifiers_read_answer_tags():
    assert (
        ExactMatchVerifier(answer_format="tags").score("<think>x</think><answer>Paris</answer>", "paris").status
        == "correct"
    )
    assert NumericVerifier(answer_format="tags").score("<answer>3.50</answer>", "3.5").status == "correct"
    assert ExactMatchVerifier(answer_format="tags").score("\\boxed{Paris}", "paris").status == "no_answer"


def test_the_task_chooses_the_format_for_the_prompt_and_the_reward():
    from rlvr.tasks.answer_formats import TAGS_SYSTEM
    from rlvr.training.step import check_components

    parts = check_components(resolve(None, ["task.settings={answer_format: tags, per_band: 20}", "reward.workers=0"]))
    p = parts.task.problems("train")[0]
    msgs = parts.task.messages(p)
    assert msgs[0]["content"] == TAGS_SYSTEM and "<answer>7</answer>" in msgs[2]["content"]
    tagged = f"<think>thinking</think>\n<answer>{p.answer}</answer>"
    result = parts.reward([tagged, f"\\boxed{{{p.answer}}}"], [p, p])
    assert result.terms == {"correct": [1.0, 0.0], "format": [1.0, 0.0]}
    assert [v.status for v in result.verdicts] == ["correct", "no_answer"]
    boxed = check_components(resolve(None, ["task.settings={per_band: 20}", "reward.workers=0"]))
    assert boxed.reward([f"\\boxed{{{p.answer}}}"], [p]).terms == {"correct": [1.0], "format": [1.0]}


def test_a_wrong_answer_format_is_a_config_error(tmp_path):
    from rlvr.training.step import check_components

    with pytest.raises(
        ConfigError, match="task.settings.answer_format: unknown answer format 'xml'; choose from boxed, tags"
    ):
        check_components(resolve(None, ["task.settings={answer_format: xml, per_band: 20}"]))
    data = tmp_path / "d.jsonl"
    data.write_text('{"prompt": "1+1?", "answer": "2"}\n')
    parts = check_components(resolve(None, ["task.name=jsonl", f"task.settings={{path: {data}, answer_format: tags}}"]))
    assert parts.task.answer_format == "tags" and parts.reward.terms[0].verifier.answer_format == "tags"
