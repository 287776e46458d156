"""Episodes inside a training step (rlvr.training.episodes): the batch the update trains on holds exactly the ids the
sampler produced each turn with the environment's ids between them (mask 0), for every local backend; the built-in
`tool` and `retry` environments graded by the task's real reward; faults cost their episode only; the episode
figures by hand; config mistakes in the episode section stop before any model loads; two steps train from the
command line with a tool environment given as package.module:attr."""

import json
import textwrap

import pytest

from conftest import make_tiny_llama, train_two_steps
from rlvr.config import Config, ConfigError, RewardConfig, resolve
from rlvr.environments.build import build_tools
from rlvr.environments.calls import parse_hermes, run_call
from rlvr.environments.episode import Episode
from rlvr.environments.figures import episode_metrics
from rlvr.environments.retry import RetryEnvironment
from rlvr.tasks import load_task
from rlvr.training.episodes import episode_batch
from rlvr.training.step import check_components, run_step, setup
from rlvr.verifiers.base import Verdict
from rlvr.verifiers.compose import task_reward

ENV_MODULE = '''
from rlvr.environments.protocol import Step


class Echo:
    """Three policy turns: after each of the first two the environment answers "seen N" as a tool message;
    the third ends the episode, paid 1 when the turns so far hold an even number of characters."""

    tools = {}

    def __init__(self, task, reward, episode):
        self.task, self.n, self.chars = task, 0, 0

    def reset(self, problem):
        return list(self.task.messages(problem))

    def step(self, turn):
        self.n, self.chars = self.n + 1, self.chars + len(turn)
        if self.n < 3:
            return Step([{"role": "tool", "content": f"seen {self.n}"}])
        return Step(done=True, reward_parts={"parity": float(self.chars % 2 == 0)})


class Broken:
    tools = {}

    def __init__(self, task, reward, episode):
        pass

    def reset(self, problem):
        return [{"role": "user", "content": problem.prompt}]
'''


@pytest.fixture
def env_module(tmp_path, monkeypatch):
    folder = tmp_path / "envmod"
    folder.mkdir()
    (folder / "my_envs.py").write_text(textwrap.dedent(ENV_MODULE))
    monkeypatch.syspath_prepend(str(folder))
    return "my_envs"


def episode_config(tmp_path, backend="hf", **over):
    sets = {
        "output_dir": str(tmp_path / "run"),
        "task.name": "tool_arithmetic",
        "task.settings": "{per_band: 10}",
        "reward.workers": 0,
        "rollout.backend": backend,
        "rollout.dtype": "float32",
        "rollout.prompts_per_step": 2,
        "rollout.group_size": 2,
        "rollout.max_new_tokens": 6,
        "train.steps": 2,
        "train.lr": 0.05,
        "train.autocast": "none",  # float32 as the sampler (the class default before issue 64's `auto`)
        "train.micro_batch_size": 4,
        "log.samples_every": 1,
        "log.checkpoint_every": 0,
        "model.lora.r": 4,
        "model.save_merged": False,
        "episode.max_total_tokens": 200,
        **over,
    }
    return resolve(None, [f"{k}={v}" for k, v in sets.items()])


class Recording:
    """The sampler, with each call's prompts and the ids it returned per row."""

    def __init__(self, inner):
        self.inner, self.calls, self.shapes = inner, [], []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def generate(self, prompt_ids, n, **kw):
        ro = self.inner.generate(prompt_ids, n, **kw)
        rows = [ro.completion_ids[b, : int(ro.mask[b].sum())].tolist() for b in range(len(prompt_ids) * n)]
        self.shapes.append((len(prompt_ids), n))
        self.calls.append(([list(prompt_ids[b // n]) for b in range(len(prompt_ids) * n)], rows))
        return ro


@pytest.mark.parametrize("backend", ["hf", "fast"])
def test_the_step_trains_on_exactly_the_sampled_ids_with_the_environments_masked(
    tmp_path, tokenizer, env_module, backend
):
    cfg = episode_config(tmp_path, backend, **{"episode.environment": f"{env_module}:Echo", "episode.max_turns": 3})
    state = setup(check_components(cfg), policy=(make_tiny_llama(len(tokenizer)), tokenizer))
    state.sampler = Recording(state.sampler)
    result = run_step(state, 0)
    batch = result.generated
    assert len(batch) == 4 and len(state.sampler.calls) == 3  # 2 problems x G=2, three turns each
    # the first turn prefills each problem's prompt once for its G episodes; later turns have a prompt a row
    assert state.sampler.shapes == [(2, 2), (4, 1), (4, 1)]
    for row in range(4):
        sampled = [state.sampler.calls[turn][1][row] for turn in range(3)]
        prompts = [state.sampler.calls[turn][0][row] for turn in range(3)]
        n = int(batch.lengths[row])
        ids, mask = batch.completion_ids[row, :n].tolist(), batch.mask[row, :n].tolist()
        # token in: each turn's prompt is the opening plus every id so far
        assert prompts[0] == batch.prompt_ids[row]
        start = 0
        for turn in range(3):
            assert prompts[turn] == batch.prompt_ids[row] + ids[:start]
            # token out: the turn's ids, as sampled, with mask 1
            assert ids[start : start + len(sampled[turn])] == sampled[turn]
            assert mask[start : start + len(sampled[turn])] == [1.0] * len(sampled[turn])
            start += len(sampled[turn])
            if turn < 2:  # the environment's ids up to the next turn's prompt, mask 0
                nxt = len(prompts[turn + 1]) - len(batch.prompt_ids[row])
                assert mask[start:nxt] == [0.0] * (nxt - start) and nxt > start
                assert f"seen {turn + 1}" in tokenizer.decode(ids[start:nxt])
                start = nxt
        assert start == n and batch.mask[row, n:].sum() == 0
        assert batch.sampler_logp[row, :n][batch.mask[row, :n] == 0].abs().sum() == 0
    assert result.row["episode/turns"] == 3.0 and result.row["episode/ended_by_done_frac"] == 1.0
    assert result.row["throughput/gen_tok_s"] > 0
    assert "reward/parity/mean" in result.row
    # the trainer sees what the sampler saw, the environment's ids included: in float32 the two log-probs of every
    # trained token agree to rounding (attending only to the trained ids gave 1.4e-3 here, 2026-12-02)
    assert result.row["mismatch/abs_log_ratio"] < 1e-5 and result.row["mismatch/max_ratio"] < 1 + 1e-5


def test_two_steps_from_the_command_line_with_the_tool_environment(tmp_path, model_dir):
    sets = {
        "task.name": "tool_arithmetic",
        "task.settings": "{per_band: 10}",
        "episode.environment": "tool",
        "episode.tools": "[calculator, python]",
        "episode.max_turns": 2,
        "train.time_budget_min": 0,
    }
    rows, samples = train_two_steps(model_dir, tmp_path / "run", sets)
    assert [r["step"] for r in rows] == [0, 1]
    assert {"episode/turns", "episode/tool_calls", "episode/tool_error_frac", "episode/env_s"} <= set(rows[0])
    assert len(samples) == 2 * 4
    for s in samples:
        assert s["messages"][0]["role"] == "system" and "calculator" in s["messages"][0]["content"]  # tools shown
        assert len(s["turn_tokens"]) == sum(
            m["role"] == "assistant" for m in s["messages"][-2 * len(s["turn_tokens"]) :]
        )
        assert s["ended_by"] in ("done", "turns", "tokens")
    # final/ records the episode's opening, tools shown as the policy saw them, not the single-turn prompt
    record = json.loads((tmp_path / "run" / "final" / "prompt_template.json").read_text())
    assert [t["function"]["name"] for t in record["tools"]] == ["calculator", "python"]
    assert record["tools_shown"] == "in the system message"  # this chat template ignores `tools`
    assert record["example"]["messages"][0] == samples[0]["messages"][0]  # the system message with the tools block
    before = record["messages_before_question"]  # the system message with the tools, then the solved example
    assert before == samples[0]["messages"][: len(before)] and "<tools>" in record["example"]["prompt_text"]


def test_retry_tells_a_wrong_answer_and_pays_the_right_one_discounted():
    task = load_task("arithmetic", per_band=30)
    _, reward = task_reward(RewardConfig(), task)
    problem = task.problems("train")[0]
    gold = int(problem.answer)
    env = RetryEnvironment(task, reward, attempts=3, discount=0.5)
    assert env.reset(problem) == task.messages(problem)
    first = env.step(f"I think \\boxed{{{gold + 1}}}")
    assert not first.done and first.messages == [{"role": "user", "content": f"{gold + 1} is wrong. Try again."}]
    second = env.step("no box here")
    assert second.messages[0]["content"].startswith("No final answer was found")
    third = env.step(f"\\boxed{{{gold}}}")
    full = float(reward([f"\\boxed{{{gold}}}"], [problem]).total[0])
    assert third.done and third.attempt == 3 and third.verdict.status == "correct"
    assert third.reward_parts == {"answer": pytest.approx(full * 0.25)}  # 0.5 ** (3 - 1)
    env.reset(problem)
    assert env.step(f"\\boxed{{{gold}}}").reward_parts == {"answer": pytest.approx(full)}  # the first try: all of it
    env.reset(problem)
    env.step("\\boxed{0}"), env.step("\\boxed{0}")
    last = env.step("\\boxed{0}" if gold else "\\boxed{1}")
    assert (
        last.done
        and last.verdict.status == "wrong"
        and last.reward_parts["answer"] == pytest.approx(float(reward(["\\boxed{0}"], [problem]).total[0]) * 0.25)
    )


def test_a_round_of_retry_steps_graded_as_one_batch_is_the_round_taken_one_by_one():
    """RetryEnvironment.step_batch (one reward call a round, through take_steps) against step (one call an answer):
    the same Steps for right, wrong, unboxed and doubly boxed answers, at the first, second and last attempt."""
    from rlvr.environments.stepping import take_steps

    task = load_task("arithmetic", per_band=30)
    _, reward = task_reward(RewardConfig(), task)
    problems = task.problems("train")[:6]
    g = [int(p.answer) for p in problems]
    rounds = [  # each episode's answer, round by round; None once its episode is over
        [f"\\boxed{{{g[0]}}}", f"\\boxed{{{g[1] + 1}}}", "no box", "\\boxed{1} or \\boxed{2}", "x", "y"],
        [None, f"\\boxed{{{g[1]}}}", f"\\boxed{{{g[2] + 3}}}", f"\\boxed{{{g[3] + 1}}}", "z", "w"],
        [None, None, f"\\boxed{{{g[2]}}}", "still none", f"\\boxed{{{g[4]}}}", "v"],
    ]

    def play(take_round):
        envs = [RetryEnvironment(task, reward, attempts=3, discount=0.5) for _ in problems]
        for env, p in zip(envs, problems):
            env.reset(p)
        seen = []
        for answers in rounds:
            live = [i for i, a in enumerate(answers) if a is not None]
            steps = take_round([envs[i] for i in live], [answers[i] for i in live])
            seen.append(
                {
                    i: (s.done, s.messages, s.reward_parts, s.attempt, s.verdict and s.verdict.status)
                    for i, s in zip(live, steps)
                }
            )
        return seen

    one_by_one = play(lambda envs, turns: [env.step(turn) for env, turn in zip(envs, turns)])
    batched = play(lambda envs, turns: [step for step, _seconds in take_steps(envs, turns, 30.0, workers=8)])
    assert batched == one_by_one
    full = float(reward([f"\\boxed{{{g[0]}}}"], [problems[0]]).total[0])
    assert batched[0][0] == (True, [], {"answer": pytest.approx(full)}, 1, "correct")
    assert batched[0][1][1] == [{"role": "user", "content": f"{g[1] + 1} is wrong. Try again."}]
    assert batched[0][2][1][0]["content"].startswith("No final answer was found")
    assert batched[0][3][1] == [{"role": "user", "content": "Give exactly one final answer. Try again."}]
    assert batched[1][1][0] and batched[1][1][3] == 2 and batched[1][1][2] == {"answer": pytest.approx(full * 0.5)}
    assert [batched[2][i][4] for i in (2, 3, 4, 5)] == ["correct", "no_answer", "correct", "no_answer"]


class _Counted:
    """An environment whose step_batch fails: take_steps takes the round one step at a time instead."""

    tools: dict = {}
    batches = 0

    def __init__(self, bad=False):
        self.bad = bad

    def step(self, turn):
        from rlvr.environments.protocol import Step

        if self.bad:
            raise RuntimeError("broken grader")
        return Step(done=True, reward_parts={"answer": float(len(turn))})

    @staticmethod
    def step_batch(envs, turns):
        _Counted.batches += 1
        raise RuntimeError("the batch path is down")


def test_a_failed_batch_is_retaken_one_step_at_a_time_and_only_the_faulty_episode_pays():
    from rlvr.environments.stepping import Fault, take_steps

    envs = [_Counted(), _Counted(bad=True), _Counted()]
    out = take_steps(envs, ["ab", "abc", "abcd"], 5.0, workers=2)
    assert _Counted.batches == 1
    assert [o.reward_parts for o, _ in (out[0], out[2])] == [{"answer": 2.0}, {"answer": 4.0}]
    assert isinstance(out[1][0], Fault) and out[1][0].status == "error" and "broken grader" in out[1][0].detail


RIGHT = Verdict("correct", 1.0, "5")


def _episode(ids, mask, status="ok", ended_by="done", parts=None, calls=None, turns=1, verdict=None):
    ep = Episode(object(), [1, 2], [{"role": "user", "content": "q"}], opened=1)
    ep.ids, ep.mask, ep.sampler_logp = list(ids), list(mask), [-0.5 * m for m in mask]
    ep.status, ep.ended_by, ep.reward_parts = status, ended_by, dict(parts or {})
    ep.tool_calls.update(calls or {})
    ep.turn_tokens = [1] * turns
    ep.env_seconds, ep.verdict = 0.25, verdict
    return ep


def test_episode_answer_timeout_trains_as_wrong_and_fault_verdicts_leave_the_loss():
    """One rule for a graded answer's verdict, as in a single-turn step: a timeout is the policy's (trained at reward
    0), an error or a bad gold is a fault (out of the loss)."""
    timed_out, broken, bad_gold = Verdict("timeout", 0.0), Verdict("error", 0.0), Verdict("invalid_gold", 0.0)
    eps = [_episode([5, 6], [1, 1], parts={"answer": 0.0}, verdict=v) for v in (timed_out, broken, bad_gold, RIGHT)]
    batch = episode_batch(eps, pad_id=0, group_size=4)
    assert batch.mask.tolist() == [[1, 1], [0, 0], [0, 0], [1, 1]]
    assert [v.status for v in batch.verdicts] == ["timeout", "error", "invalid_gold", "correct"]


def test_entropy_counts_the_policys_ids_only():
    """An environment's ids carry sampler log p 0 (not sampled): the entropy estimate averages over the policy's."""
    from rlvr.training.metrics import sampled_entropy

    batch = episode_batch([_episode([5, 6, 7, 8], [1, 0, 0, 1]), _episode([5, 6], [1, 1])], pad_id=0, group_size=2)
    assert sampled_entropy(batch) == 0.5  # -log p = 0.5 on each of the 4 policy ids (was 2.0 / 6 with the tool's)


def test_episode_rows_faults_and_figures_by_hand():
    eps = [
        _episode([5, 6, 7, 8], [1, 0, 0, 1], parts={"answer": 1.0}, calls={"ok": 2}, turns=2, verdict=RIGHT),
        _episode([5], [1], status="error", ended_by="error"),
        _episode([5, 6], [1, 1], status="timeout", ended_by="timeout"),
        _episode([5, 6, 7], [1, 0, 1], ended_by="turns", calls={"parse_error": 1, "ok": 1}, turns=2),
    ]
    batch = episode_batch(eps, pad_id=0, group_size=2)
    assert batch.completion_ids.tolist() == [[5, 6, 7, 8], [5, 0, 0, 0], [5, 6, 0, 0], [5, 6, 7, 0]]
    # the faulty episodes leave the loss; the others train on their policy ids only
    assert batch.mask.tolist() == [[1, 0, 0, 1], [0, 0, 0, 0], [0, 0, 0, 0], [1, 0, 1, 0]]
    # an environment that broke or hung is the environment's fault: verdict "error" (rlvr.verifiers.base.FAULT_STATUSES)
    assert [v.status for v in batch.verdicts] == ["correct", "error", "error", "no_answer"]
    assert batch.verdicts[2].detail.startswith("environment timeout")
    assert batch.rewards.tolist() == [1.0, 0.0, 0.0, 0.0] and batch.terms == {"answer": [1.0, 0.0, 0.0, 0.0]}
    assert batch.group_ids.tolist() == [0, 0, 1, 1] and batch.finish == ["stop", "length", "length", "length"]
    assert batch.stats["gen_tokens"] == 2 + 1 + 2 + 2
    m = episode_metrics(eps)
    assert m["episode/turns"] == (2 + 1 + 1 + 2) / 4
    assert m["episode/tool_calls"] == 4 / 4
    assert m["episode/tool_error_frac"] == 1 / 4 and m["episode/parse_error_frac"] == 1 / 4
    assert m["episode/tool_use_frac"] == 2 / 4 and m["episode/env_s"] == 0.25
    assert m["episode/policy_token_frac"] == 7 / 10
    assert (m["episode/ended_by_done_frac"], m["episode/ended_by_error_frac"]) == (0.25, 0.25)
    assert (m["episode/ended_by_timeout_frac"], m["episode/ended_by_turns_frac"]) == (0.25, 0.25)
    # the one right answer came at the second turn: accuracy by turn 0 then 1/4
    assert (m["episode/correct_by_turn_1"], m["episode/correct_by_turn_2"]) == (0.0, 0.25)
    assert "episode/correct_by_turn_3" not in m


def test_overlong_shaping_reads_an_episodes_ids_out_of_its_token_limit():
    """max_total_tokens 10, buffer 0.5 -> 5: the soft penalty is 0 up to 5 ids, then (5 - L) / 5; the filter drops
    the episode the token limit ended, whatever its reward."""
    from dataclasses import replace

    from rlvr.algorithms.presets import PRESETS
    from rlvr.config import EpisodeConfig
    from rlvr.training.episodes import shape_overlong

    def batch():
        eps = [
            _episode([5] * 4, [1] * 4, parts={"answer": 1.0}, verdict=RIGHT),  # 4 ids: under the buffer
            _episode([5] * 8, [1, 0, 0, 0, 1, 1, 1, 1], parts={"answer": 1.0}, verdict=RIGHT),  # 8: 3 into it
            _episode([5] * 10, [1] * 10, ended_by="tokens"),  # the limit ended it
            _episode([5] * 6, [1] * 6, ended_by="turns"),  # a turn limit is not truncation
        ]
        return episode_batch(eps, pad_id=0, group_size=2)

    limits = EpisodeConfig(max_total_tokens=10)
    grpo = PRESETS["grpo"]
    soft = shape_overlong(batch(), replace(grpo, overlong="soft", overlong_buffer_frac=0.5), limits)
    assert soft.rewards.tolist() == pytest.approx([1.0, 1.0 - 3 / 5, 0.0 - 5 / 5, 0.0 - 1 / 5])
    filtered = shape_overlong(batch(), replace(grpo, overlong="filter"), limits)
    assert filtered.mask.sum(-1).tolist() == [4, 5, 0, 6] and filtered.rewards.tolist() == [1.0, 1.0, 0.0, 0.0]
    untouched = shape_overlong(batch(), grpo, limits)
    assert untouched.rewards.tolist() == [1.0, 1.0, 0.0, 0.0] and untouched.mask.sum().item() == 4 + 5 + 10 + 6


def test_a_hung_environment_times_out_its_episode_only(tokenizer):
    import time

    from rlvr.environments.episode import answer_turn, start_episode
    from rlvr.environments.protocol import Step
    from rlvr.tasks.base import Problem

    class Hangs:
        tools = {}

        def reset(self, problem):
            return [{"role": "user", "content": problem.prompt}]

        def step(self, turn):  # Python-level work, interrupted at the deadline (a C call is waited out, then timed out)
            start = time.perf_counter()
            while time.perf_counter() - start < 30:
                pass
            return Step(done=True)

    ep, extra = start_episode(Hangs(), Problem("p", "q"), tokenizer)
    t0 = time.perf_counter()
    going = answer_turn(ep, Hangs(), tokenizer, extra, "hi", True, tokenizer.eos_token, step_timeout_s=0.3)
    assert not going and ep.status == "timeout" and ep.ended_by == "timeout"
    assert time.perf_counter() - t0 < 5 and ep.env_seconds >= 0.3


@pytest.mark.parametrize(
    "over, message",
    [
        ({"episode.environment": "nope"}, r"'episode\.environment' = 'nope'; choose from none, tool, retry"),
        ({"episode.environment": "tool", "episode.tools": "[calculator, no_such_mod:fn]"}, r"cannot import"),
        ({"episode.environment": "my_envs:Broken"}, r"Broken has no step\(\)"),
        ({"episode.environment": "my_envs:Missing"}, r"has no attribute 'Missing'"),
    ],
)
def test_episode_mistakes_stop_before_any_model(tmp_path, env_module, over, message):
    with pytest.raises(ConfigError, match=message):
        check_components(episode_config(tmp_path, **over))
    assert not (tmp_path / "run").exists()


def test_tool_arithmetic_golds_traces_and_splits():
    task = load_task("tool_arithmetic", per_band=40)
    splits = {s: task.problems(s) for s in ("train", "validation", "heldout")}
    ids = [{p.id for p in ps} for ps in splits.values()]
    assert not (ids[0] & ids[1] or ids[0] & ids[2] or ids[1] & ids[2])
    assert sum(map(len, ids)) == 40 * 4
    tools = build_tools(
        Config.from_dict(resolve(None, ["episode.environment=tool", "episode.tools=[calculator]"])).episode
    )
    for p in sum(splits.values(), []):
        a_b = p.meta["expression"]
        assert int(p.answer) == eval(a_b)  # the gold is the expression's value (digits and * - only)
        call, tool_msg, final = p.meta["trace"]
        (parsed,) = parse_hermes(call["content"])
        assert run_call(parsed, tools).text == tool_msg["content"] == p.answer
        assert final["content"].endswith(f"\\boxed{{{p.answer}}}")
    _, reward = task_reward(RewardConfig(), task)
    p = splits["heldout"][0]
    assert reward([p.meta["trace"][-1]["content"]], [p]).verdicts[0].status == "correct"
    assert {p.band for p in splits["train"]} == {"3x2", "4x3", "5x4", "two-step"}


def test_single_turn_runs_take_the_single_turn_round(tmp_path, tokenizer):
    from rlvr.training.batch import rollout_round

    cfg = episode_config(tmp_path, **{"task.name": "arithmetic", "task.settings": "{per_band: 20}"})
    parts = check_components(cfg)
    assert parts.new_environment is None
    assert setup(parts, policy=(make_tiny_llama(len(tokenizer)), tokenizer)).rollout_round is rollout_round


def test_reference_tool_traces_are_episode_ids_with_the_tools_masked(tokenizer):
    from rlvr.training.sft import pad_examples
    from rlvr.training.sft_data import reference_examples

    task = load_task("tool_arithmetic", per_band=5)
    tools = build_tools(Config.from_dict(resolve("tool-use")).episode)
    problems = task.problems("train")[:3]
    examples = reference_examples(tokenizer, task, problems, "trace", tools)
    for p, e in zip(problems, examples):
        call, tool_msg, final = p.meta["trace"]
        ids, mask = e["completion_ids"], e["completion_mask"]
        # the prompt shows the tools (in the system message: SmolLM2's template has no `tools`) and the question
        prompt = tokenizer.decode(e["prompt_ids"])
        assert '"name": "calculator"' in prompt and prompt.rstrip().endswith("assistant") and p.prompt in prompt
        trained = tokenizer.decode([t for t, m in zip(ids, mask) if m == 1])
        masked = tokenizer.decode([t for t, m in zip(ids, mask) if m == 0])
        assert trained == call["content"] + tokenizer.eos_token + final["content"] + tokenizer.eos_token
        assert tool_msg["content"] in masked and "tool" in masked and call["content"] not in masked
        # the layout is what an episode makes: the call, then the tool's turn and the next header, then the answer
        first = tokenizer(call["content"], add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        assert ids[: len(first)] == first and mask[: len(first)] == [1.0] * len(first)
    _, _, padded, attend = pad_examples(examples, tokenizer.pad_token_id)
    assert padded.sum() == sum(sum(e["completion_mask"]) for e in examples)
    # the tool's ids are not targets, but they are seen: attend covers every id of each trace
    assert attend.sum(1).tolist() == [len(e["completion_ids"]) for e in examples]


def test_the_tool_use_preset_and_its_no_tools_control(tmp_path):
    from rlvr.config import as_config
    from rlvr.training.controls import control_cfg, control_eval_cfg
    from rlvr.training.main_folder import from_sft

    cfg = as_config(resolve("tool-use", [f"output_dir={tmp_path / 'main'}", "task.settings.per_band=10"]))
    parts = check_components(cfg)
    assert parts.new_environment is not None and cfg.train.init_from_sft and cfg.eval.controls == ["no_tools"]
    control = control_cfg(cfg, tmp_path / "main", "no_tools")
    assert control.episode.environment == "none" and control.task.settings["with_tools"] is False
    assert control.episode.tools == []  # none offered, none named (rlvr.training.lifecycle.check_registered)
    assert control.reward.control == "none" and control.model.name == cfg.model.name
    assert cfg.episode.environment == "tool" and "with_tools" not in cfg.task.settings  # the RLVR config unchanged
    assert check_components(control).new_environment is None
    assert control_eval_cfg(cfg, "random_rate") is cfg
    no_tools_task = load_task("tool_arithmetic", **control.task.settings)
    assert "calculator" not in str(no_tools_task.messages(no_tools_task.problems("train")[0]))
    assert from_sft(cfg, tmp_path / "main" / "sft").model.name == str(
        (tmp_path / "main" / "sft").absolute() / "final" / "merged"
    )
    with pytest.raises(ConfigError, match="no_tools compares against RL without tools"):
        from rlvr.training.controls import check_controls

        single = as_config(resolve(None, ["eval.controls=[no_tools]"]))
        check_controls(single, tmp_path / "x", single)


def test_rlvr_eval_scores_an_environment_task_as_episodes(tokenizer):
    from rlvr.config import as_config
    from rlvr.evaluation.run_eval import EvalSettings, evaluate_model

    model = make_tiny_llama(len(tokenizer))
    episode = {"environment": "tool", "tools": ["calculator"], "max_turns": 2, "max_total_tokens": 40}
    records, summary = evaluate_model(
        (model, tokenizer),
        "tool_arithmetic",
        EvalSettings(n=2, ks=(1, 2), max_new_tokens=6, limit=4, progress=False),
        task_settings={"per_band": 10},
        cfg=as_config({"episode": episode}),
    )
    assert len(records) == 4 * 2 + 4 and {r.mode for r in records} == {"sampled", "greedy"}
    assert all(r.completion.startswith("[assistant] ") for r in records)
    assert summary["setup"]["episode"]["environment"] == "tool"
    assert set(summary["episodes"]) == {"sampled", "greedy"}
    assert 1 <= summary["episodes"]["sampled"]["episode/turns"] <= 2
    assert summary["overall"]["pass@k"]["1"]["value"] == 0.0  # a random model multiplies nothing


@pytest.mark.slow
def test_the_real_model_trains_a_tool_episode_step(tmp_path, env_module):
    """SmolLM2-135M-Instruct (the embedded default, its own chat template) through one tool-episode step with the
    fast sampler: every row's trained ids are its sampled turns with the environment's between, mask 0 on those."""
    cfg = episode_config(
        tmp_path,
        "fast",
        **{
            "model.name": "smollm2-135m-instruct",
            "episode.environment": f"{env_module}:Echo",
            "episode.max_turns": 3,
            "rollout.max_new_tokens": 12,
        },
    )
    state = setup(check_components(cfg))
    state.sampler = Recording(state.sampler)
    result = run_step(state, 0)
    batch = result.generated
    for row in range(len(batch)):
        n = int(batch.lengths[row])
        sampled = sum((state.sampler.calls[t][1][row] for t in range(3)), [])
        trained = [int(t) for t, m in zip(batch.completion_ids[row, :n], batch.mask[row, :n]) if m == 1]
        assert trained == sampled
        assert "seen 2" in state.tokenizer.decode(batch.completion_ids[row, :n][batch.mask[row, :n] == 0])
    assert result.row["episode/turns"] == 3.0 and "grad_norm" in result.row
