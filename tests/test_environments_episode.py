"""Episodes, token in and token out, on the tiny model with the real tokenizer and chat template, for every local
sampler backend: the ids trained on are exactly the ids the sampler produced each turn with the environment's ids
between them (mask 0), each turn's prompt is exactly the episode's ids so far, and a faulty environment costs only
its episode."""

import time

import pytest
import torch

from conftest import make_tiny_llama
from rlvr.config import Config
from rlvr.environments.episode import TemplateNotAppendOnly, run_episodes, suffix_ids
from rlvr.environments.protocol import Step
from rlvr.sampling import build_sampler
from rlvr.tasks.base import Problem


class Counting:
    """Answers every turn with a tool message "seen N", done after `turns` policy turns; reward 1 per turn."""

    tools: dict = {}

    def __init__(self, turns: int = 3, fail_at: int | None = None):
        self.turns, self.fail_at, self.n = turns, fail_at, 0

    def reset(self, problem):
        return [{"role": "system", "content": "Count."}, {"role": "user", "content": problem.prompt}]

    def step(self, turn: str) -> Step:
        self.n += 1
        if self.fail_at == self.n:
            raise RuntimeError("the environment broke")
        return Step(
            [{"role": "tool", "content": f"seen {self.n}"}], done=self.n >= self.turns, reward_parts={"turn": 1.0}
        )


class Recording:
    """A sampler wrapper that records each call's prompts and the rows it returned."""

    def __init__(self, inner):
        self.inner, self.calls = inner, []

    def generate(self, prompt_ids, n, **kw):
        ro = self.inner.generate(prompt_ids, n, **kw)
        rows = [ro.completion_ids[b, : int(ro.mask[b].sum())].tolist() for b in range(len(prompt_ids) * n)]
        self.calls.append(([list(prompt_ids[b // n]) for b in range(len(prompt_ids) * n)], rows))
        return ro


@pytest.mark.parametrize("backend", ["hf", "fast"])
def test_trained_ids_are_the_sampled_ids_with_the_environments_between(tokenizer, backend):
    model = make_tiny_llama(len(tokenizer))
    rollout = Config().rollout.__class__(backend=backend, dtype="float32")
    sampler = Recording(build_sampler(rollout, model, tokenizer))
    problems = [Problem(f"p{i}", f"Count to {i}.") for i in range(3)]
    envs = [Counting(turns=3) for _ in problems]
    episodes = run_episodes(
        sampler,
        tokenizer,
        envs,
        problems,
        max_turns=5,
        max_total_tokens=400,
        max_new_tokens=6,
        generator=torch.Generator().manual_seed(0),
    )
    assert len(sampler.calls) == 3  # three policy turns, every episode advanced in each call
    for i, ep in enumerate(episodes):
        assert ep.ended_by == "done" and ep.status == "ok" and ep.reward_parts == {"turn": 3.0}
        ids, pos = ep.ids, 0
        for turn, (prompts, rows) in enumerate(sampler.calls):
            assert prompts[i] == ep.prompt_ids + ids[:pos]  # token in: the prompt is exactly the ids so far
            sampled = rows[i]
            assert ids[pos : pos + len(sampled)] == sampled  # token out: the sampler's ids, untouched
            assert ep.mask[pos : pos + len(sampled)] == [1.0] * len(sampled)
            pos += len(sampled)
            if turn < 2:  # the environment's answer, then the next assistant header: mask 0
                env_end = next(k for k in range(pos, len(ids)) if ep.mask[k] == 1.0) if pos < len(ids) else len(ids)
                env_text = tokenizer.decode(ids[pos:env_end])
                assert f"tool\nseen {turn + 1}" in env_text and env_text.endswith("<|im_start|>assistant\n")
                assert ep.mask[pos:env_end] == [0.0] * (env_end - pos)
                pos = env_end
        assert pos == len(ids) == len(ep.mask) == len(ep.sampler_logp)
        assert ep.turn_tokens == [len(rows[i]) for _, rows in sampler.calls]
        assert all(lp == 0.0 for lp, m in zip(ep.sampler_logp, ep.mask) if m == 0.0)


def test_a_faulty_environment_costs_only_its_episode(tokenizer):
    model = make_tiny_llama(len(tokenizer))
    sampler = build_sampler(Config().rollout.__class__(backend="hf", dtype="float32"), model, tokenizer)
    problems = [Problem("a", "Count."), Problem("b", "Count.")]
    episodes = run_episodes(
        sampler,
        tokenizer,
        [Counting(3, fail_at=2), Counting(3)],
        problems,
        max_turns=5,
        max_total_tokens=400,
        max_new_tokens=4,
        generator=torch.Generator().manual_seed(1),
    )
    assert (episodes[0].status, episodes[0].ended_by, episodes[0].detail) == (
        "error",
        "error",
        "RuntimeError: the environment broke",
    )
    assert (episodes[1].status, episodes[1].ended_by) == ("ok", "done")
    assert episodes[0].turn_tokens and len(episodes[0].turn_tokens) == 2


def test_limits_end_episodes_by_turns_and_by_tokens(tokenizer):
    model = make_tiny_llama(len(tokenizer))
    sampler = build_sampler(Config().rollout.__class__(backend="hf", dtype="float32"), model, tokenizer)
    by_turns = run_episodes(
        sampler,
        tokenizer,
        [Counting(99)],
        [Problem("a", "x")],
        max_turns=2,
        max_total_tokens=999,
        max_new_tokens=4,
        generator=torch.Generator().manual_seed(2),
    )
    assert by_turns[0].ended_by == "turns" and len(by_turns[0].turn_tokens) == 2
    by_tokens = run_episodes(
        sampler,
        tokenizer,
        [Counting(99)],
        [Problem("a", "x")],
        max_turns=50,
        max_total_tokens=30,
        max_new_tokens=4,
        generator=torch.Generator().manual_seed(2),
    )
    assert by_tokens[0].ended_by == "tokens" and len(by_tokens[0].ids) >= 30


class MeetsOthers(Counting):
    """A Counting environment whose step first waits for every other episode's step at a barrier: it passes only
    when the round's steps run side by side (a row waiting on its tool does not hold the others' steps back)."""

    def __init__(self, barrier, turns: int = 2):
        super().__init__(turns)
        self.barrier = barrier

    def step(self, turn: str) -> Step:
        self.barrier.wait()  # raises BrokenBarrierError past the barrier's timeout: the episode's status "error"
        time.sleep(0.2)  # a tool's wait (outside the GIL, as a sandboxed process's)
        return super().step(turn)


@pytest.mark.parametrize("workers", [4, 1])
def test_a_rounds_environment_steps_run_side_by_side(tokenizer, workers):
    import threading

    model = make_tiny_llama(len(tokenizer))
    sampler = build_sampler(Config().rollout.__class__(backend="hf", dtype="float32"), model, tokenizer)
    barrier = threading.Barrier(4, timeout=1.0)
    problems = [Problem(f"p{i}", "Count.") for i in range(4)]
    episodes = run_episodes(
        sampler,
        tokenizer,
        [MeetsOthers(barrier) for _ in problems],
        problems,
        max_turns=3,
        max_total_tokens=400,
        max_new_tokens=4,
        generator=torch.Generator().manual_seed(3),
        step_workers=workers,
    )
    if workers == 4:  # all four steps meet, twice (a round each), and the episodes end as Counting's do
        assert [(ep.status, ep.ended_by, ep.reward_parts) for ep in episodes] == [("ok", "done", {"turn": 2.0})] * 4
        assert len(episodes[0].turn_tokens) == 2
        # time/verify counts the rounds' wall time: two rounds of four 0.2 s waits side by side, not 8 x 0.2 s
        assert sum(ep.env_seconds for ep in episodes) >= 1.6 and episodes.env_wall_s < 1.2
    else:  # one at a time, the first step waits out the barrier alone: every episode faults, none hangs the run
        assert [(ep.status, ep.detail[:19]) for ep in episodes] == [("error", "BrokenBarrierError:")] * 4


def test_steps_side_by_side_give_the_same_episodes_as_one_after_another(tokenizer):
    model = make_tiny_llama(len(tokenizer))
    sampler = build_sampler(Config().rollout.__class__(backend="hf", dtype="float32"), model, tokenizer)
    problems = [Problem(f"p{i}", f"Count to {i}.") for i in range(5)]
    runs = []
    for workers in (1, 8):
        runs.append(
            run_episodes(
                sampler,
                tokenizer,
                [Counting(turns=1 + i % 3, fail_at=2 if i == 2 else None) for i in range(5)],
                problems,
                max_turns=4,
                max_total_tokens=400,
                max_new_tokens=5,
                generator=torch.Generator().manual_seed(4),
                step_workers=workers,
            )
        )
    fields = lambda ep: (ep.ids, ep.mask, ep.messages, ep.reward_parts, ep.status, ep.ended_by)  # noqa: E731
    assert [fields(ep) for ep in runs[0]] == [fields(ep) for ep in runs[1]]


class DropsEarlierTurns:
    """A template that is not append-only: it renders only the last assistant turn's content."""

    eos_token = "<e>"

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=False, **kw):
        last = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=-1)
        text = "".join(
            f"[{m['role']}]{m['content'] if m['role'] != 'assistant' or i == last else ''}<e>"
            for i, m in enumerate(messages)
        )
        return text + ("[assistant]" if add_generation_prompt else "")

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [ord(c) for c in text]}


def test_a_template_that_is_not_append_only_is_refused_not_re_rendered():
    tok = DropsEarlierTurns()
    messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "a1"},
        {"role": "tool", "content": "r1"},
    ]
    assert suffix_ids(tok, messages[:1], "a1", True, messages[2:], {}, "<e>") == [
        ord(c) for c in "[tool]r1<e>[assistant]"
    ]
    with pytest.raises(TemplateNotAppendOnly, match="append-only"):
        suffix_ids(tok, messages, "a2", True, [{"role": "tool", "content": "r2"}], {}, "<e>")


def test_tools_reach_a_template_without_tool_support_through_the_system_message(tokenizer):
    from rlvr.environments.builtin import calculator
    from rlvr.environments.episode import template_kwargs
    from rlvr.environments.tools import tool_from_function

    messages = [{"role": "system", "content": "Solve."}, {"role": "user", "content": "12 * 34?"}]
    shown, extra = template_kwargs(tokenizer, messages, {"calculator": tool_from_function(calculator)})
    assert extra == {}  # SmolLM2's template ignores `tools`
    assert shown[0]["content"].startswith("Solve.\n\nYou may call these tools; write a call as <tool_call>")
    assert '"name": "calculator"' in shown[0]["content"] and shown[1:] == messages[1:]
    assert template_kwargs(tokenizer, messages, {}) == (messages, {})
