"""A mistake in any config section stops `rlvr train` with one line (exit 2) before a model is loaded, and writes
nothing. The model named here does not exist: had the command reached the model, the error would name it instead."""

import pytest

from rlvr.cli import main

NO_MODEL = "model.name=/nonexistent/model-folder"


@pytest.mark.parametrize(
    "preset, sets, message",
    [
        (
            "default",
            ["reward.terms=[{kind: mathz}]"],
            "reward.terms[0].kind: unknown verifier kind 'mathz'; choose from math,",
        ),
        (
            "default",
            ["curriculum.kind=fixed", "curriculum.weights={9-digit: 1.0}"],
            "curriculum.weights: unknown band '9-digit'; bands: 1-digit, 2-digit, 3-digit",
        ),
        (
            "reasoning-gym",
            ["task.settings={families: {nope: {}}}"],
            "reasoning_gym families ['nope'] have no rlvr grader; choose from basic_arithmetic,",
        ),
        ("default", ["eval.out_of_domain=[{name: nope}]"], "eval.out_of_domain 'nope': task.name: unknown task 'nope'"),
        (
            "default",
            ["algorithm.surrogate=clipped"],
            "algorithm.surrogate: unknown loss surrogate 'clipped'; choose from clip",
        ),
        (
            "default",
            ["rollout.backend=fastest"],
            "config key 'rollout.backend' = 'fastest'; choose from hf, fast, remote, vllm",
        ),
        # issue 51: trained without tools, exit 0, no word
        (
            "default",
            ["episode.tools=[calculator]"],
            "rlvr train: episode.tools = ['calculator'] but episode.environment is 'none', which offers no tools; set "
            "episode.environment: tool to train with them, or episode.tools: [] to train without",
        ),
        (
            "tool-use",
            ["episode.environment=none"],
            "episode.tools = ['calculator'] but episode.environment is 'none'",
        ),
    ],
)
def test_a_config_mistake_exits_2_in_one_line_before_the_model_and_writes_nothing(
    tmp_path, capsys, preset, sets, message
):
    run = tmp_path / "run"
    args = ["train", preset, *sum((["--set", s] for s in [NO_MODEL, *sets]), []), "--output-dir", str(run)]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert message in err, err
    assert "\n" not in err and "nonexistent" not in err
    assert not run.exists()
