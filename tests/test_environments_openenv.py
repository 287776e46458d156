"""An OpenEnv environment run in process (rlvr.environments.openenv_env): reset with a seed from the problem's id,
its observation as the prompt, the policy's turn as its typed action (a text field, or JSON validated by its
model; an invalid one told and counted), its observations' rewards adding up, done ending the episode; a class
that is not an OpenEnv environment stops the run before any model loads; two steps train from the command line."""

import textwrap

import pytest

from conftest import train_two_steps

pytest.importorskip("openenv.core.env_server.interfaces", reason="the openenv extra is not installed")

from rlvr.config import Config, ConfigError, RewardConfig, resolve  # noqa: E402
from rlvr.environments.build import environment_factory  # noqa: E402
from rlvr.tasks import load_task  # noqa: E402
from rlvr.training.step import check_components  # noqa: E402
from rlvr.verifiers.compose import task_reward  # noqa: E402

OPENENV_MODULE = '''
import random

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State


class GuessAction(Action):
    guess: int


class GuessObservation(Observation):
    hint: str = ""


class GuessNumber(Environment):
    """Guess a number from 1 to `top`; each wrong guess is told higher or lower and costs 0.1."""

    def __init__(self, top: int = 10):
        super().__init__()
        self.top, self.target, self._state = top, None, State()

    def reset(self, seed=None, episode_id=None, **kwargs):
        self.target = random.Random(seed).randint(1, self.top)
        self._state = State(episode_id=episode_id, step_count=0)
        return GuessObservation(hint=f"Guess my number from 1 to {self.top}. Answer with {{\\"guess\\": n}}.")

    def step(self, action: GuessAction, timeout_s=None, **kwargs) -> GuessObservation:
        self._state.step_count += 1
        if action.guess == self.target:
            return GuessObservation(hint="right", done=True, reward=1.0)
        return GuessObservation(hint="higher" if action.guess < self.target else "lower", reward=-0.1)

    @property
    def state(self):
        return self._state


class EchoAction(Action):
    message: str


class EchoObservation(Observation):
    echoed: str = ""
    length: int = 0


class Echo(Environment):
    def reset(self):
        return EchoObservation(echoed="say something")

    def step(self, action: EchoAction, timeout_s=None, **kwargs) -> EchoObservation:
        return EchoObservation(echoed=action.message, length=len(action.message), done=True, reward=len(action.message) % 2)

    @property
    def state(self):
        return State()


class Unannotated(Echo):
    def step(self, action, timeout_s=None, **kwargs):
        return super().step(action)


class NotAnEnv:
    pass
'''


@pytest.fixture
def openenv_module(tmp_path, monkeypatch):
    folder = tmp_path / "oemod"
    folder.mkdir()
    (folder / "oe_envs.py").write_text(textwrap.dedent(OPENENV_MODULE))
    monkeypatch.syspath_prepend(str(folder))
    return "oe_envs"


def make(source, **episode):
    sets = {"environment": "openenv", "source": source, **episode}
    cfg = resolve(None, [f"episode.{k}={v}" for k, v in sets.items()])
    task = load_task("arithmetic")
    _, reward = task_reward(RewardConfig(workers=0), task)
    return environment_factory(Config.from_dict(cfg).episode, task, reward), task


def test_an_openenv_class_plays_its_episode_in_process(openenv_module):
    new_env, task = make("oe_envs:GuessNumber", args="{top: 4}")
    problem = task.problems("train")[0]
    env = new_env()
    assert env.reset(problem) == [{"role": "user", "content": 'Guess my number from 1 to 4. Answer with {"guess": n}.'}]
    target = env.env.target
    again = new_env()
    again.reset(problem)
    assert again.env.target == target  # the seed is the problem's id: the same episode every time

    step = env.step("I think it is a number")
    assert step.tool_statuses == ["parse_error"] and "not a valid GuessAction" in step.messages[0]["content"]
    wrong = 1 if target != 1 else 2
    step = env.step(f'My guess: {{"guess": {wrong}}}')
    assert not step.done and step.messages == [{"role": "user", "content": "higher" if wrong < target else "lower"}]
    assert step.reward_parts == {"GuessNumber": -0.1}
    step = env.step(f'{{"guess": {target}}}')
    assert step.done and step.reward_parts == {"GuessNumber": 1.0}
    assert step.verdict.status == "wrong"  # the episode's rewards add up to 0.9, under 1


def test_a_single_text_action_takes_the_whole_turn(openenv_module):
    new_env, task = make("oe_envs:Echo")
    env = new_env()
    opening = env.reset(task.problems("train")[0])  # two fields of its own: the observation as JSON
    assert opening == [{"role": "user", "content": '{"echoed": "say something", "length": 0}'}]
    step = env.step("abc")
    assert step.done and step.reward_parts == {"Echo": 1.0} and step.verdict.status == "correct"


@pytest.mark.parametrize(
    "source, message",
    [
        ("oe_envs:NotAnEnv", r"not an openenv Environment subclass"),
        ("oe_envs:Unannotated", r"annotate Unannotated\.step\(action: YourAction\)"),
        ("", r"needs episode\.source"),
    ],
)
def test_a_broken_openenv_class_stops_before_any_model(tmp_path, openenv_module, source, message):
    sets = {
        "output_dir": str(tmp_path / "run"),
        "reward.workers": 0,
        "episode.environment": "openenv",
        "episode.source": source,
    }
    with pytest.raises(ConfigError, match=message):
        check_components(resolve(None, [f"{k}={v}" for k, v in sets.items()]))
    assert not (tmp_path / "run").exists()


def test_two_steps_from_the_command_line_with_an_openenv_class(tmp_path, model_dir, openenv_module):
    sets = {
        "episode.environment": "openenv",
        "episode.source": "oe_envs:GuessNumber",
        "episode.args": "{top: 3}",
        "episode.max_turns": 2,
    }
    rows, samples = train_two_steps(model_dir, tmp_path / "run", sets)
    assert [r["step"] for r in rows] == [0, 1] and all("episode/parse_error_frac" in r for r in rows)
    assert len(samples) == 2 * 4
    for s in samples:
        assert s["messages"][0]["content"].startswith("Guess my number from 1 to 3.")
