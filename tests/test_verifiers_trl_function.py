"""Another project's final-answer grader audited by rlvr: a TRL reward function as the verifier kind `trl_reward`
(rlvr.verifiers.trl_function), called as TRL calls it, faced with the math suite's hacks and equivalences."""

import re
import textwrap

import pytest

from rlvr.cli import main
from rlvr.tasks.base import Problem
from rlvr.verifiers.registry import build_verifier

REWARDS = '''
from rlvr.integrations.trl import reward_funcs

rlvr_math = reward_funcs("math", workers=0)[0][0]  # rlvr's own grader, handed to TRL


def contains_gold(prompts, completions, answer, **kwargs):
    """The common naive grader: paid when the gold appears anywhere in the last message."""
    return [float(str(a) in c[-1]["content"]) for c, a in zip(completions, answer)]


def not_applicable(prompts, completions, **kwargs):
    return [None for _ in completions]
'''


@pytest.fixture
def rewards_module(tmp_path, monkeypatch):
    (tmp_path / "their_rewards.py").write_text(textwrap.dedent(REWARDS))
    monkeypatch.syspath_prepend(str(tmp_path))
    return "their_rewards"


def test_a_trl_reward_function_grades_as_a_verifier(rewards_module):
    v = build_verifier("trl_reward", {"func": "their_rewards:contains_gold"})
    assert v.score("so 12 it is", Problem("p", "What is 3 * 4?", "12")).status == "correct"
    assert v.score("13", "12").status == "wrong"
    none = build_verifier("trl_reward", {"func": "their_rewards:not_applicable"}).score("12", "12")
    assert none.status == "error" and "not_applicable" in none.detail


def rates(out: str) -> tuple[float, float]:
    accept = float(re.search(r"false-accept rate: ([\d.]+)%", out).group(1))
    reject = float(re.search(r"false-reject rate: ([\d.]+)%", out).group(1))
    return accept, reject


def test_rlvr_audit_attacks_another_projects_grader(rewards_module, capsys):
    code = main(["audit", "--verifier", "trl_reward", "--set", "func=their_rewards:contains_gold", "--workers", "0"])
    naive = capsys.readouterr().out
    assert code == 1 and "FAIL (bare number): '4' vs gold '4'" in naive  # the unboxed number pays
    accept, reject = rates(naive)
    assert accept > 30.0 and reject > 40.0  # 35.4% and 53.7% when written
    # rlvr's own grader through TRL's calling convention: exactly the rates of `rlvr audit --verifier math`
    main(["audit", "--verifier", "trl_reward", "--set", "func=their_rewards:rlvr_math", "--workers", "0"])
    through_trl = rates(capsys.readouterr().out)
    main(["audit", "--verifier", "math", "--workers", "0"])
    assert through_trl == rates(capsys.readouterr().out)


@pytest.mark.parametrize(
    "func, why",
    [
        (
            "their_rewardz:contains_gold",  # a typo, or the module's folder not on PYTHONPATH
            "cannot import 'their_rewardz' (ModuleNotFoundError: No module named 'their_rewardz')",
        ),
        ("their_rewards:contains_golds", "module 'their_rewards' has no attribute 'contains_golds'"),
    ],
)
def test_a_trl_reward_that_does_not_import_stops_the_run_before_anything_loads(
    rewards_module, tmp_path, model_dir, capsys, func, why
):
    """Issue 64: such a term trained to the end, exit 0, every verdict `error`. Now one line, exit 2, before the
    model loads and before the run directory is made."""
    run = tmp_path / "run"
    terms = f"reward.terms=[{{name: correct, kind: trl_reward, func: '{func}'}}]"
    code = main(["train", "--set", f"model.name={model_dir}", "--set", terms, "--output-dir", str(run)])
    err = capsys.readouterr().err
    assert code == 2 and err == (
        f"rlvr train: reward.terms[0]: bad settings for kind 'trl_reward': func={func!r}: {why}\n"
    )
    assert not run.exists()
