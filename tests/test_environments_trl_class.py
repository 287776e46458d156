"""A TRL environment class (rlvr.environments.trl_class) run by rlvr: constructed with no arguments, reset with the
problem's columns (its string appended to the question), public methods as tools, get_reward and TRL reward
functions as its reward; rlvr's verifier as the final-answer grader on request; a broken class stops the run
before any model loads with one line naming it; a fault inside an episode costs that episode only; two steps
train from the command line by package.module:Class."""

import json
import textwrap

import pytest

from conftest import train_two_steps, trl_python
from rlvr.config import ConfigError, RewardConfig, resolve
from rlvr.environments.build import environment_factory
from rlvr.environments.episode import answer_turn, start_episode
from rlvr.tasks import load_task
from rlvr.training.step import check_components
from rlvr.verifiers.compose import task_reward

TRL_MODULE = '''
class Counter:
    """Count up to the problem's answer with increment(); the reward is 1 when the count hits it."""

    def __init__(self):
        self.count, self.target, self.seen = 0, None, None

    def reset(self, answer=None, **columns):
        self.count, self.target, self.seen = 0, int(answer), columns
        return f" (Count to {answer}.)"

    def increment(self, by: int) -> int:
        """Add to the counter.

        Args:
            by: how much to add.
        """
        self.count += by
        return self.count

    def get_reward(self) -> float:
        return float(self.count == self.target)

    def _private(self):
        return "not a tool"


def said_done(prompts, completions, environments, answer, **kwargs):
    """A TRL reward function: 0.5 when the last message says done, plus 0.5 when the counter overshot."""
    return [0.5 * ("done" in c[-1]["content"]) + 0.5 * (e.count > int(a)) for c, e, a in zip(completions, environments, answer)]


class NeedsArgs:
    def __init__(self, size):
        pass

    def reset(self, **columns):
        return None


class ResetRaises:
    def reset(self, **columns):
        raise KeyError("level")

    def get_reward(self):
        return 0.0


class ResetReturnsInt:
    def reset(self, **columns):
        return 3

    def get_reward(self):
        return 0.0


class UndocumentedTool:
    def reset(self, **columns):
        return None

    def move(self, x: int) -> int:
        return x

    def get_reward(self):
        return 0.0


class NoReward:
    def reset(self, **columns):
        return None


class RewardRaises:
    def reset(self, **columns):
        return None

    def get_reward(self):
        raise RuntimeError("scoreboard offline")
'''


@pytest.fixture
def trl_module(tmp_path, monkeypatch):
    folder = tmp_path / "trlmod"
    folder.mkdir()
    (folder / "trl_envs.py").write_text(textwrap.dedent(TRL_MODULE))
    monkeypatch.syspath_prepend(str(folder))
    return "trl_envs"


def arithmetic():

    task = load_task("arithmetic")
    _, reward = task_reward(RewardConfig(workers=0), task)
    return task, reward


def make(trl_module, source="Counter", **episode):
    cfg = resolve(None, [f"episode.{k}={v}" for k, v in {"environment": "trl", "source": source, **episode}.items()])
    from rlvr.config import Config

    task, reward = arithmetic()
    return environment_factory(Config.from_dict(cfg).episode, task, reward), task


def call(name, **arguments):
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def test_a_trl_class_opens_calls_its_methods_and_pays_its_own_reward(trl_module):
    new_env, task = make(trl_module, "trl_envs:Counter", reward_funcs="[trl_envs:said_done]")
    env, problem = new_env(), task.problems("train")[0]
    opening = env.reset(problem)
    assert opening[:-1] == task.messages(problem)[:-1]
    assert opening[-1]["content"] == task.messages(problem)[-1]["content"] + f" (Count to {problem.answer}.)"
    seen = env.instance.seen  # reset got the problem's columns, as TRL passes a dataset row
    assert seen["id"] == problem.id and seen["question"] == problem.prompt and seen["prompt"] == task.messages(problem)
    assert list(env.tools) == ["increment"]  # public methods only; reset and get_reward are not tools
    assert env.tools["increment"].schema["function"]["parameters"]["properties"]["by"]["type"] == "integer"

    target = int(problem.answer)
    step = env.step("I count. " + call("increment", by=target - 1))
    assert step.messages == [{"role": "tool", "name": "increment", "content": str(target - 1)}] and not step.done
    step = env.step(call("increment", by=1) + call("nope"))
    assert [m["content"] for m in step.messages][0] == str(target) and step.tool_statuses == ["ok", "unknown_tool"]
    step = env.step("done")
    assert step.done and step.reward_parts == {"Counter": 1.0, "said_done": 0.5}
    assert step.verdict.status == "correct"

    env = new_env()  # a fresh instance per episode
    env.reset(problem)
    step = env.step(call("increment", by=target + 5))
    step = env.step("I stop here")
    assert step.reward_parts == {"Counter": 0.0, "said_done": 0.5} and step.verdict.status == "wrong"


def test_rlvrs_verifier_grades_the_final_answer_on_request(trl_module):
    task, reward = arithmetic()
    problem = task.problems("train")[0]
    # the task's whole reward: 1 for the right answer, 0.1 for its boxed format (the default reward terms)
    for grader, parts in (("task", {"answer": 1.1}), ("both", {"Counter": 0.0, "answer": 1.1})):
        new_env, _ = make(trl_module, "trl_envs:Counter", grader=grader)
        env = new_env()
        env.reset(problem)
        step = env.step(f"The answer is \\boxed{{{problem.answer}}}")
        assert step.reward_parts == parts and step.verdict.status == "correct"
    new_env, _ = make(trl_module, "trl_envs:NoReward", grader="task")  # the task's verifier is reward enough
    env = new_env()
    env.reset(problem)
    assert env.step("\\boxed{-1}").verdict.status == "wrong"


@pytest.mark.parametrize(
    "source, message",
    [
        ("", r"needs episode\.source"),
        ("trl_envs:NeedsArgs", r"NeedsArgs\(\): TypeError.*takes no arguments"),
        ("trl_envs:ResetRaises", r"ResetRaises\.reset raised KeyError: 'level'"),
        ("trl_envs:ResetReturnsInt", r"ResetReturnsInt\.reset raised EnvironmentFault: .*returned int"),
        ("trl_envs:UndocumentedTool", r"UndocumentedTool\.move'?: no docstring"),
        ("trl_envs:NoReward", r"NoReward has no get_reward\(\) and episode\.reward_funcs is empty"),
        ("trl_envs:Nope", r"has no attribute 'Nope'"),
    ],
)
def test_a_broken_trl_class_stops_before_any_model_naming_it(tmp_path, trl_module, source, message):
    sets = {
        "output_dir": str(tmp_path / "run"),
        "task.name": "arithmetic",
        "reward.workers": 0,
        "episode.environment": "trl",
        "episode.source": source,
    }
    with pytest.raises(ConfigError, match=message):
        check_components(resolve(None, [f"{k}={v}" for k, v in sets.items()]))
    assert not (tmp_path / "run").exists()


def test_a_fault_inside_an_episode_costs_that_episode_only(trl_module, tokenizer):
    new_env, task = make(trl_module, "trl_envs:RewardRaises")
    env, problem = new_env(), task.problems("train")[0]
    ep, extra = start_episode(env, problem, tokenizer)
    assert not answer_turn(ep, env, tokenizer, extra, "my answer", True, tokenizer.eos_token)
    assert ep.status == "error" and "scoreboard offline" in ep.detail


def test_two_steps_from_the_command_line_with_a_trl_class(tmp_path, model_dir, trl_module):
    sets = {
        "task.name": "arithmetic",
        "episode.environment": "trl",
        "episode.source": "trl_envs:Counter",
        "episode.reward_funcs": "[trl_envs:said_done]",
        "episode.max_turns": 2,
    }
    rows, samples = train_two_steps(model_dir, tmp_path / "run", sets)
    assert [r["step"] for r in rows] == [0, 1]
    for r in rows:  # the environment's own reward and the TRL reward function, each a reward part
        assert 0.0 <= r["reward/Counter/mean"] <= 1.0 and 0.0 <= r["reward/said_done/mean"] <= 1.0
    assert len(samples) == 2 * 4
    for s in samples:
        assert "increment" in s["messages"][0]["content"]  # the class's method shown as a tool
        assert any("(Count to " in m["content"] for m in s["messages"] if m["role"] == "user")  # reset's string
        assert set(s["reward_parts"]) <= {"Counter", "said_done"}


def test_our_environment_as_a_trl_class_shows_and_runs_the_same_tools(tokenizer):
    """rlvr.integrations.trl.environment_class, read the way TRL reads a class (here by rlvr's own TRL adapter): the
    same tool schemas as rlvr's tool environment, the same results, the rows as rlvr lays them out."""
    from rlvr.config import Config
    from rlvr.environments.build import build_tools
    from rlvr.environments.trl_class import TRLClassEnvironment
    from rlvr.integrations.trl import environment_class, environment_dataset

    cls = environment_class("tool_arithmetic", tools=["calculator", "python"])
    task = load_task("tool_arithmetic")
    _, reward = task_reward(
        RewardConfig(**{**resolve(None, ["task.name=tool_arithmetic"])["reward"], "workers": 0}), task
    )
    env = TRLClassEnvironment(cls, task, reward, grader="task")
    ours = build_tools(
        Config.from_dict(resolve(None, ["episode.environment=tool", "episode.tools=[calculator, python]"])).episode
    )
    assert {n: t.schema for n, t in env.tools.items()} == {n: t.schema for n, t in ours.items()}
    problem = task.problems("train")[0]
    assert env.reset(problem) == task.messages(problem)  # its reset returns None: TRL's prompt is the row's
    expression = problem.meta["trace"][0]["content"].split('"expression": "')[1].split('"')[0]
    step = env.step(call("calculator", expression=expression) + call("python", code="print(6 * 7)"))
    assert [m["content"] for m in step.messages] == [problem.answer, "42"]
    assert dict(env.instance.tool_calls) == {"calculator": 1, "python": 1}
    step = env.step(f"\\boxed{{{problem.answer}}}")
    assert step.verdict.status == "correct"
    rows = environment_dataset("tool_arithmetic")
    assert rows[0]["prompt"] == task.messages(problem) and rows[0]["answer"] == problem.answer


@pytest.mark.skipif(
    trl_python() is None,
    reason="trl is not installed here; set RLVR_TRL_PYTHON to a venv with trl, math-verify, pyyaml, datasets",
)
def test_trls_own_loop_and_rlvr_agree_on_a_trl_class_and_trl_takes_ours(tmp_path, tiny_policy, trl_module):
    """One real GRPOTrainer step with the Counter class (tests/trl_env_step.py): every rollout's prompt after reset
    and its rewards are what rlvr's adapter gives for the same problem and the same completion. A second step
    trains with rlvr's tool_arithmetic environment as TRL's environment_factory, rlvr's tools in TRL's list."""
    import os
    import subprocess
    from pathlib import Path

    from rlvr.config import Config

    model, tokenizer = tiny_policy
    model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    root, out = Path(__file__).resolve().parents[1], tmp_path / "out.json"
    paths = [str(root / "src"), str(tmp_path / "trlmod")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "TOKENIZERS_PARALLELISM": "false"}
    script = str(root / "tests" / "trl_env_step.py")
    proc = subprocess.run(
        [trl_python(), script, str(tmp_path / "model"), str(out), trl_module],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(out.read_text())
    assert got["trl_class"]["global_step"] == 1 and got["trl_class"]["tools"] == ["increment"]
    assert got["rlvr_env"]["global_step"] == 1 and got["rlvr_env"]["tools"] == ["calculator", "python"]
    assert "rewards/correct/mean" in got["rlvr_env"]["logs"][0]

    cfg = resolve(None, ["episode.environment=trl", "episode.source=trl_envs:Counter"])
    task, reward = arithmetic()
    new_env = environment_factory(
        Config.from_dict({**cfg, "episode": {**cfg["episode"], "reward_funcs": []}}).episode, task, reward
    )
    problems = {p.id: p for s in ("train", "validation", "heldout") for p in task.problems(s)}
    assert len(got["rollouts"]) == 4
    for rollout in got["rollouts"]:
        rlvr_env = new_env()
        assert rlvr_env.reset(problems[rollout["id"]]) == rollout["prompt"]  # the same first observation
        for message in rollout["completion"]:
            if message["role"] == "assistant":
                step = rlvr_env.step(message["content"])
        import trl_envs

        said = trl_envs.said_done(
            [rlvr_env.prompt], [rlvr_env.completion], [rlvr_env.instance], [problems[rollout["id"]].answer]
        )
        assert {"Counter": step.reward_parts["Counter"], "said_done": said[0]} == rollout["rewards"]
