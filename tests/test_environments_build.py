"""The environment registry's entries (rlvr.environments.build): `none` is an entry that builds no environment, and
what callers asked of its name (does a rollout make episodes?) is the entry's `episodic`, a plug-in's too."""

import pytest

from rlvr.cli import main
from rlvr.config import EpisodeConfig, as_config
from rlvr.environments.build import ENVIRONMENTS, EnvironmentKind, environment_factory, episodic
from rlvr.environments.protocol import Step
from rlvr.serve.scoring import config_notes
from rlvr.tasks.base import Problem


class EchoEnv:
    """A plug-in environment (episode.environment: test_environments_build:make_echo): one turn, reward 1."""

    def reset(self, problem):
        return [{"role": "user", "content": problem.prompt}]

    def step(self, turn):
        return Step(messages=[], done=True)


def make_echo(task, reward, episode):
    return EchoEnv()


class OneProblem:
    name = "one"

    def problems(self, split):
        return [Problem(id="p0", prompt="say hi", answer="hi", band="all")]


def test_none_is_an_entry_that_builds_no_environment(capsys):
    assert "none" in ENVIRONMENTS and ENVIRONMENTS.get("none") == EnvironmentKind(None)
    assert [name for name in ENVIRONMENTS if not ENVIRONMENTS.get(name).episodic] == ["none"]
    assert not episodic(EpisodeConfig())  # the default: one answer per prompt
    assert environment_factory(EpisodeConfig(), OneProblem(), reward=None) is None
    assert main(["list", "environment"]) == 0
    assert "  none       one answer per prompt: single-turn rollouts, no environment" in capsys.readouterr().out


@pytest.mark.parametrize("name", ["retry", "test_environments_build:make_echo", "test_environments_build:EchoEnv"])
def test_a_plugin_environment_is_episodic_as_a_builtin_is(name):
    assert episodic(EpisodeConfig(environment=name))
    assert ENVIRONMENTS.get(name).make is not None


def test_a_plugin_environment_is_built_per_episode():
    new = environment_factory(EpisodeConfig(environment="test_environments_build:make_echo"), OneProblem(), None)
    assert isinstance(new(), EchoEnv) and new() is not new()


def test_rlvr_serve_notes_an_episodic_run_whatever_its_environment(tmp_path):
    plain = as_config({"output_dir": str(tmp_path)})
    assert config_notes(plain) == []
    for name in ("retry", "test_environments_build:make_echo"):
        cfg = as_config({"output_dir": str(tmp_path), "episode": {"environment": name}})
        assert config_notes(cfg) == [
            f"its rollouts are episodes (episode.environment {name}); served: one completion graded by the task's "
            "reward, without the environment"
        ]
