"""The one sample-and-score path (rlvr.sampling.scored): rows aligned to their problems through one reward call, the
seed formula, and the calls each consumer (RL round, SFT data, validation, evaluation) makes through it."""

import pytest
import torch

from conftest import make_tiny_llama
from rlvr.config import Config
from rlvr.evaluation.driver import evaluate
from rlvr.evaluation.validation import validate
from rlvr.sampling import build_sampler
from rlvr.sampling.scored import draw_generator, draw_seed, sample_and_score, score_rows
from rlvr.tasks.base import Problem
from rlvr.training.sft_data import collect_correct
from rlvr.verifiers.compose import Reward, Term
from rlvr.verifiers.registry import build_verifier

ANY, NONE = r"[\s\S]", r"(?!)"  # gold patterns: any first character is right; none is


def first_char_reward() -> Reward:
    """The real regex grader on a completion's first non-space character, against each problem's own gold."""
    verifier = build_verifier("regex", {"pattern": r"^\s*(\S)", "gold_is_pattern": True})
    return Reward([Term("first_char", "regex", 1.0, verifier, workers=0, timeout_s=5.0)])


def rollout_config(**changes):
    cfg = Config.from_dict({})
    return cfg.rollout.__class__(**{**vars(cfg.rollout), "max_new_tokens": 6, "dtype": "float32", **changes})


@pytest.fixture(scope="module")
def sampler(tokenizer):
    return build_sampler(rollout_config(), make_tiny_llama(len(tokenizer)), tokenizer, backend="hf")


def test_the_seed_formula():
    assert draw_seed(7, 0) == 7_000_021 and draw_seed(7, 3) == 7_000_024 and draw_seed(0, 5) == 5
    assert draw_seed(1, 0) != draw_seed(0, 999_999)  # neighbouring seeds never share a draw below the stride
    assert draw_generator(7, 3).initial_seed() == 7_000_024


def test_rows_are_aligned_to_their_problems_in_one_reward_call(sampler, tokenizer):
    """Problem i's rows are i*n .. i*n+n-1, each scored against its own gold: the middle problem's gold matches
    nothing, so its rows (and only they) are wrong."""
    calls = []
    reward = first_char_reward()

    def counted(completions, problems):
        calls.append([p.id for p in problems])
        return reward(completions, problems)

    problems = [Problem(id=f"p{i}", prompt="q", answer=gold) for i, gold in enumerate((ANY, NONE, ANY))]
    ids = [tokenizer(f"Say {w}.")["input_ids"] for w in ("one", "two", "three")]
    scored = sample_and_score(sampler, problems, ids, 2, counted, max_new_tokens=6, generator=draw_generator(3, 1))
    assert calls == [["p0", "p0", "p1", "p1", "p2", "p2"]]  # one call over the P*n rows
    assert [p.id for p in scored.problems] == calls[0]
    assert scored.rollouts.group_ids.tolist() == [0, 0, 1, 1, 2, 2]
    assert [v.status for v in scored.result.verdicts] == ["correct", "correct", "wrong", "wrong", "correct", "correct"]
    assert scored.result.total == [1.0, 1.0, 0.0, 0.0, 1.0, 1.0]
    assert scored.generate_s > 0 and scored.verify_s > 0


def test_the_same_seed_draws_the_same_texts(sampler, tokenizer):
    problems = [Problem(id="p0", prompt="q", answer=ANY)]
    ids = [tokenizer("Say one.")["input_ids"]]

    def texts(index):
        gen = draw_generator(11, index)
        return sample_and_score(sampler, problems, ids, 4, first_char_reward(), max_new_tokens=6, generator=gen)

    first, again, other = texts(2), texts(2), texts(3)
    assert first.rollouts.texts == again.rollouts.texts
    assert torch.equal(first.rollouts.completion_ids, again.rollouts.completion_ids)
    assert first.rollouts.texts != other.rollouts.texts


def test_a_reward_that_drops_rows_fails_on_the_spot():
    def short(completions, problems):
        return first_char_reward()(completions[:-1], problems[:-1])

    with pytest.raises(ValueError) as err:
        score_rows(short, ["a", "b", "c"], [Problem(id=str(i), prompt="q", answer=ANY) for i in range(3)])
    assert str(err.value) == "reward returned 2 verdicts for 3 completions"


class Recording:
    """A sampler stand-in that records each generate call's arguments (the generator as its seed) and samples "x"."""

    def __init__(self):
        self.calls = []

    def generate(self, prompt_ids, n, **kw):
        from rlvr.sampling.rollouts import Rollouts

        gen = kw.pop("generator", "absent")
        self.calls.append((len(prompt_ids), n, kw, gen if gen == "absent" else gen.initial_seed()))
        b = len(prompt_ids) * n
        return Rollouts(
            prompt_ids=prompt_ids,
            completion_ids=torch.full((b, 1), 5),
            mask=torch.ones(b, 1),
            sampler_logp=torch.zeros(b, 1),
            group_ids=torch.arange(len(prompt_ids)).repeat_interleave(n),
            finish=["stop"] * b,
            texts=["x"] * b,
        )


def test_validation_decodes_greedily_without_a_generator():
    sampler = Recording()
    problems = [
        Problem(id=f"p{i}", prompt="q", answer=gold, band=b)
        for i, (gold, b) in enumerate(((ANY, "easy"), (NONE, "easy"), (ANY, "hard")))
    ]
    out = validate(sampler, problems, [[1], [2], [3]], first_char_reward(), max_new_tokens=9)
    assert sampler.calls == [(3, 1, {"max_new_tokens": 9, "temperature": 0.0}, "absent")]
    assert out == {
        "val/accuracy": pytest.approx(2 / 3),
        "val/no_answer_frac": 0.0,
        "val/easy/accuracy": 0.5,
        "val/hard/accuracy": 1.0,
    }


def test_sft_rounds_draw_with_the_seed_formula(tokenizer):
    """Round r of the SFT baseline's rejection sampling draws with draw_generator(seed, r), as the RL step does."""
    sampler = Recording()

    class Task:
        def messages(self, p):
            return [{"role": "user", "content": p.prompt}]

    problems = [Problem(id=f"p{i}", prompt=f"q{i}", answer=ANY) for i in range(4)]
    rollout = rollout_config(prompts_per_step=2, group_size=2, max_new_tokens=3, temperature=0.7)
    kept, stats = collect_correct(
        sampler, tokenizer, Task(), first_char_reward(), problems, budget=8, group_size=2, rollout=rollout, seed=5
    )
    settings = {"max_new_tokens": 3, "temperature": 0.7, "top_p": rollout.top_p, "top_k": rollout.top_k}
    assert sampler.calls == [(2, 2, settings, 5 * 1_000_003 + 1), (2, 2, settings, 5 * 1_000_003 + 2)]
    assert stats["generated"] == 8 and stats["correct"] == 8 and len(kept) == 4  # "x" once per problem


def test_evaluation_scores_its_texts_through_the_same_half():
    """The driver's policy_generate returns texts only; its rows go through score_rows, so a short reward fails alike."""

    def generate(chats, n, temperature):
        return [["x"] * n for _ in chats]

    def short(completions, problems):
        return first_char_reward()(completions[:-1], problems[:-1])

    problems = [Problem(id=f"p{i}", prompt="q", answer=ANY) for i in range(2)]
    with pytest.raises(ValueError, match="^reward returned 3 verdicts for 4 completions$"):
        evaluate(generate, short, problems, n=2, ks=(1,), greedy=False, lenient_format=None)
