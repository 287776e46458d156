"""A `verifiers` environment (the 0.2 API) run by rlvr (rlvr.environments.verifiers_env): its dataset as the task's
problems (held-out rows never trained on), its own rollout (prompt, tools, env_response, stop conditions) advanced
one policy turn per step, its rubric as the reward; rlvr's verifier as the grader on request; a broken environment
stops the run before any model loads, a fault inside an episode costs that episode only; two steps train from the
command line by environment id. A verifiers without the 0.2 API (0.4: verifiers.v1) is refused in one line naming
the installed version, the range to install and why, before any model loads: faked here wherever this runs, and
the real 0.4.0 where it is installed (a second venv: python3 -m venv /tmp/vf04 && /tmp/vf04/bin/pip install
torch==2.13.0 && /tmp/vf04/bin/pip install -e '.[dev]' verifiers==0.4.0, then /tmp/vf04/bin/python -m pytest on
this file)."""

import importlib.metadata
import json
import sys
import textwrap
import types

import pytest

from conftest import train_two_steps
from rlvr.config import ConfigError, RewardConfig, resolve
from rlvr.environments.episode import answer_turn, start_episode
from rlvr.environments.verifiers_env import VerifiersEnvironment
from rlvr.tasks import load_task
from rlvr.training.step import check_components
from rlvr.verifiers.compose import task_reward

try:
    import verifiers as vf
except ImportError:
    vf = None
INSTALLED = None if vf is None else importlib.metadata.version("verifiers")
API_02 = vf is not None and hasattr(vf, "MultiTurnEnv")  # what rlvr runs: verifiers>=0.2.1,<0.3
api_02 = pytest.mark.skipif(
    not API_02,
    reason="the verifiers extra is not installed (pip install 'rlvr[verifiers]')"
    if vf is None
    else f"verifiers {INSTALLED} is installed: these tests run the 0.2 API (pip install 'verifiers>=0.2.1,<0.3')",
)

REFUSAL = (
    "verifiers {v} is installed, but rlvr runs environments of the verifiers 0.2 API (vf.SingleTurnEnv, "
    "vf.MultiTurnEnv, vf.ToolEnv), verifiers>=0.2.1,<0.3: pip install 'verifiers>=0.2.1,<0.3' (the pin of "
    "rlvr[verifiers]). Not supported yet: verifiers 0.4's API (verifiers.v1: Env, Taskset, Harness) runs each "
    "episode's chat loop as a separate program, installed by uv, that asks an HTTP endpoint for every model turn, "
    "and rlvr's sampler serves no such endpoint turn by turn"
)

VF_MODULE = '''
import verifiers as vf
from datasets import Dataset


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first.
        b: the second.
    """
    return a + b


def rows(n):
    return [{"question": f"What is {i} + {2 * i}? Use the add tool.", "answer": str(3 * i)} for i in range(n)]


def right(completion, answer, **kwargs):
    return 1.0 if answer in str(completion[-1].content) else 0.0


def load_environment(n: int = 40, max_turns: int = 3, eval_n: int = 0):
    return vf.ToolEnv(
        dataset=Dataset.from_list(rows(n)),
        eval_dataset=Dataset.from_list(rows(eval_n)) if eval_n else None,
        tools=[add],
        rubric=vf.Rubric(funcs=[right]),
        max_turns=max_turns,
        system_prompt="Use the tools, then give the answer.",
    )


def single_turn():
    return vf.SingleTurnEnv(dataset=Dataset.from_list(rows(10)), rubric=vf.Rubric(funcs=[right], weights=[2.0]))


class Faulty(vf.ToolEnv):
    async def env_response(self, messages, state, **kwargs):
        raise RuntimeError("the sandbox is gone")


def faulty():
    return Faulty(dataset=Dataset.from_list(rows(10)), tools=[add], rubric=vf.Rubric(funcs=[right]))


def fails_to_load():
    raise FileNotFoundError("no data here")


def not_an_env():
    return 42
'''


@pytest.fixture
def vf_module(tmp_path, monkeypatch):
    folder = tmp_path / "vfmod"
    folder.mkdir()
    (folder / "vf_envs.py").write_text(textwrap.dedent(VF_MODULE))
    monkeypatch.syspath_prepend(str(folder))
    return "vf_envs"


def call(name, **arguments):
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def environment(env, grader="environment", **args):
    task = load_task("verifiers", env=env, args=args)
    _, reward = task_reward(RewardConfig(workers=0), task)
    return task, VerifiersEnvironment(task, reward, grader)


@api_02
def test_a_tool_env_runs_its_own_rollout_one_policy_turn_a_step(vf_module):
    task, env = environment("vf_envs:load_environment")
    splits = {s: task.problems(s) for s in ("train", "validation", "heldout")}
    assert sum(map(len, splits.values())) == 40 and all(splits.values())  # no eval_dataset: split by id hash
    assert not {p.id for p in splits["train"]} & {p.id for p in splits["heldout"]}
    problem = splits["train"][0]
    opening = env.reset(problem)
    assert opening == [
        {"role": "system", "content": "Use the tools, then give the answer."},
        {"role": "user", "content": problem.prompt},
    ]
    schema = env.tools["add"].schema["function"]
    assert schema["name"] == "add" and schema["parameters"]["properties"]["a"]["type"] == "integer"
    a = int(problem.answer) // 3
    step = env.step("Let me add. " + call("add", a=a, b=2 * a))
    assert step.messages == [{"role": "tool", "content": problem.answer}] and not step.done
    assert step.tool_statuses == ["ok"]
    step = env.step(f"It is {problem.answer}.")
    assert step.done and step.reward_parts == {"rubric": 1.0} and step.verdict.status == "correct"

    env.reset(problem)  # its stop condition (max_turns=3) ends the episode, scored by the rubric
    for _ in range(2):
        assert not env.step(call("add", a=1, b=1)).done
    step = env.step(call("add", a=1, b=1))
    assert step.done and step.reward_parts == {"rubric": 0.0} and step.verdict.status == "wrong"


@api_02
def test_its_eval_dataset_is_the_held_out_split_and_single_turn_envs_end_at_once(vf_module):
    task, _ = environment("vf_envs:load_environment", n=10, eval_n=5)
    assert [len(task.problems(s)) for s in ("train", "validation", "heldout")] == [10, 0, 5]
    task, env = environment("vf_envs:single_turn")
    problem = task.problems("train")[0]
    env.reset(problem)
    step = env.step(f"{problem.answer}")
    assert step.done and step.reward_parts == {"rubric": 2.0} and step.verdict.status == "correct"


@api_02
def test_rlvrs_verifier_grades_its_final_answer_on_request(vf_module):
    task, env = environment("vf_envs:load_environment", grader="both")
    problem = task.problems("train")[0]
    env.reset(problem)
    step = env.step(f"\\boxed{{{problem.answer}}}")
    assert step.reward_parts == {"rubric": 1.0, "answer": 1.1} and step.verdict.status == "correct"  # 1 + format


@api_02
def test_a_fault_inside_an_episode_costs_that_episode_only(vf_module, tokenizer):
    task, env = environment("vf_envs:faulty")
    ep, extra = start_episode(env, task.problems("train")[0], tokenizer)
    assert not answer_turn(ep, env, tokenizer, extra, call("add", a=1, b=2), True, tokenizer.eos_token)
    assert ep.status == "error" and "the sandbox is gone" in ep.detail


@api_02
@pytest.mark.parametrize(
    "settings, environment, message",
    [
        ("{env: vf_envs:fails_to_load}", "verifiers", r"task\.settings\.env='vf_envs:fails_to_load'.*no data here"),
        ("{env: vf_envs:not_an_env}", "verifiers", r"gave int, not a vf\.MultiTurnEnv"),
        ("{env: no_such_environment}", "verifiers", r"no_such_environment"),
        ("{}", "verifiers", r"needs task\.settings\.env"),
    ],
)
def test_a_broken_verifiers_environment_stops_before_any_model(tmp_path, vf_module, settings, environment, message):
    sets = {
        "output_dir": str(tmp_path / "run"),
        "task.name": "verifiers",
        "task.settings": settings,
        "reward.workers": 0,
        "episode.environment": environment,
    }
    with pytest.raises(ConfigError, match=message):
        check_components(resolve(None, [f"{k}={v}" for k, v in sets.items()]))
    assert not (tmp_path / "run").exists()


@api_02
def test_the_verifiers_environment_needs_its_own_task(tmp_path):
    sets = {"output_dir": str(tmp_path / "run"), "reward.workers": 0, "episode.environment": "verifiers"}
    with pytest.raises(ConfigError, match=r"set task\.name: verifiers"):
        check_components(resolve(None, [f"{k}={v}" for k, v in sets.items()]))


@api_02
def test_two_steps_from_the_command_line_by_environment_id(tmp_path, model_dir, vf_module):
    sets = {
        "task.name": "verifiers",
        "task.settings": "{env: vf-envs, args: {n: 24}}",  # vf.load_environment's id: module vf_envs
        "episode.environment": "verifiers",
        "episode.max_turns": 2,
    }
    rows, samples = train_two_steps(model_dir, tmp_path / "run", sets)
    assert [r["step"] for r in rows] == [0, 1]
    assert all(0.0 <= r["reward/rubric/mean"] <= 1.0 for r in rows)  # the rubric's reward, a reward part
    assert len(samples) == 2 * 4
    for s in samples:
        assert "add" in s["messages"][0]["content"]  # the environment's tool shown (SmolLM2: in the system turn)
        assert s["messages"][1]["content"].startswith("What is ")
        assert set(s["reward_parts"]) <= {"rubric"} and s["ended_by"] in ("done", "turns", "tokens")


def verifiers_sets(tmp_path) -> dict:
    return {
        "output_dir": str(tmp_path / "run"),
        "task.name": "verifiers",
        "task.settings": "{env: vf_envs:load_environment}",
        "reward.workers": 0,
        "episode.environment": "verifiers",
    }


@pytest.fixture
def verifiers_04(monkeypatch):
    """verifiers 0.4 as rlvr sees it, wherever this runs: a package with no vf.MultiTurnEnv (0.4's top level holds
    only __version__ and verifiers.v1), its version from the installed distribution's metadata."""
    fake = types.ModuleType("verifiers")
    fake.__version__ = "0.4.0"
    monkeypatch.setitem(sys.modules, "verifiers", fake)
    real = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "0.4.0" if name == "verifiers" else real(name))
    return fake


def test_verifiers_04_is_refused_naming_the_version_to_install_before_any_model(tmp_path, verifiers_04):
    with pytest.raises(ConfigError) as refused:
        check_components(resolve(None, [f"{k}={v}" for k, v in verifiers_sets(tmp_path).items()]))
    assert str(refused.value) == REFUSAL.format(v="0.4.0")
    assert not (tmp_path / "run").exists()


def test_without_install_metadata_the_modules_own_version_is_named(tmp_path, verifiers_04, monkeypatch):
    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    verifiers_04.__version__ = "0.4.1.dev3"  # a source checkout on sys.path, as 0.4 itself reports it
    with pytest.raises(ConfigError) as refused:
        check_components(resolve(None, [f"{k}={v}" for k, v in verifiers_sets(tmp_path).items()]))
    assert str(refused.value) == REFUSAL.format(v="0.4.1.dev3")


def test_rlvr_train_exits_2_with_the_refusal_in_one_line(tmp_path, verifiers_04, capsys):
    from rlvr.cli import main

    sets = verifiers_sets(tmp_path)
    run = sets.pop("output_dir")
    args = sum((["--set", f"{k}={v}"] for k, v in sets.items()), [])
    assert main(["train", "default", *args, "--output-dir", run]) == 2
    assert capsys.readouterr().err == f"rlvr train: {REFUSAL.format(v='0.4.0')}\n"
    assert not (tmp_path / "run").exists()


@pytest.mark.skipif(
    vf is None or API_02,
    reason="needs a verifiers without the 0.2 API installed (0.4.0, in a second venv: see this file's docstring)",
)
def test_the_installed_verifiers_04_is_refused_by_its_version(tmp_path):
    with pytest.raises(ConfigError) as refused:
        check_components(resolve(None, [f"{k}={v}" for k, v in verifiers_sets(tmp_path).items()]))
    assert str(refused.value) == REFUSAL.format(v=INSTALLED)
    assert not (tmp_path / "run").exists()
