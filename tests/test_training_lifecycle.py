"""The run lifecycle around every recipe (rlvr.training.lifecycle) and what the command line says of it: the command
that resumes a stopped run, ready to paste (issue 51), and which config differences a resume counts as changes."""

import shlex

import pytest

from rlvr.cli import build_parser
from rlvr.cli.config_args import resume_command, resume_target
from rlvr.config import resolve
from rlvr.training.lifecycle import RunStopped, changed_settings


@pytest.mark.parametrize(
    "argv, run_dir, command",
    [
        (
            ["train", "cfg.yaml", "--set", "train.lr=1e-5", "--set", "reward.terms=[{kind: math}]", "--overwrite"],
            "runs/x",
            "rlvr train cfg.yaml --set train.lr=1e-5 --set 'reward.terms=[{kind: math}]' --resume runs/x",
        ),
        # continued once already from the run directory alone: the same again, with its overrides
        (
            ["train", "--resume", "runs/x", "--set", "train.steps=50"],
            "runs/x",
            "rlvr train --set train.steps=50 --resume runs/x",
        ),
        # --output-dir is what --resume names; --overwrite would start over
        (["train", "default", "--output-dir", "runs/y", "--overwrite"], "runs/y", "rlvr train default --resume runs/y"),
        (
            ["sft", "default", "--set", "sft.epochs=3", "--output-dir", "runs/s", "--quiet"],
            "runs/s",
            "rlvr sft default --set sft.epochs=3 --quiet --resume runs/s",
        ),
        (
            ["train", "--from-trl", "r.yaml", "--set", "train.steps=5"],
            "runs/train",
            "rlvr train --from-trl r.yaml --set train.steps=5 --output-dir runs/train --resume",
        ),
        # the main job continues its folder when run again: its own command, less --overwrite
        (
            [
                "run",
                "--preset",
                "tool-use",
                "--budget",
                "15",
                "--controls",
                "--set",
                "seed=1",
                "--output-dir",
                "t",
                "--overwrite",
            ],
            "t/rlvr",
            "rlvr run --preset tool-use --budget 15 --controls --set seed=1 --output-dir t",
        ),
        (["run", "--steps", "40"], "runs/default/rlvr", "rlvr run --steps 40"),
    ],
)
def test_the_resume_command_is_the_users_own_and_continues_the_stopped_run(
    argv, run_dir, command, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / run_dir).mkdir(parents=True)
    (tmp_path / run_dir / "config.yaml").write_text("seed: 0\n")  # a stopped run's folder
    args = build_parser().parse_args(argv)
    assert resume_command(args, run_dir) == command
    again = build_parser().parse_args(shlex.split(command)[1:])
    assert not again.overwrite
    if again.verb != "run" and not getattr(
        again, "from_trl", None
    ):  # it names the stopped run's folder and keeps the overrides
        key = "sft.output_dir" if again.verb == "sft" else "output_dir"
        source, sets = resume_target(again, None if again.verb == "train" else list(again.sets), key)
        assert again.resume is True and f"{key}={run_dir}" in sets and set(args.sets) <= set(sets)
        assert source == (args.config or f"{run_dir}/config.yaml")


def test_a_stopped_run_exits_130_or_143_and_prints_the_command(monkeypatch, capsys, tmp_path):
    import rlvr.training.loop

    def stopped(cfg, **kw):
        raise RunStopped(143, tmp_path / "run", 3)

    monkeypatch.setattr(rlvr.training.loop, "train", stopped)
    from rlvr.cli import main

    assert main(["train", "default", "--set", "train.steps=9", "--output-dir", str(tmp_path / "run")]) == 143
    assert capsys.readouterr().out == (
        f"resume with: rlvr train default --set train.steps=9 --resume {tmp_path / 'run'}\n"
    )


def test_a_resume_counts_as_changes_only_settings_that_change_the_run():
    saved = resolve(None, ["train.lr=0.001"])
    del saved["log"]["checkpoint_minutes"]  # a run made before rlvr had the setting
    assert changed_settings(saved, resolve(None, ["train.lr=0.001"])) == []
    assert changed_settings(saved, resolve(None, ["train.lr=0.002", "log.checkpoint_minutes=5"])) == [
        "log.checkpoint_minutes",
        "train.lr",
    ]
    # tools no episode offers (a no_tools control recorded its preset's) change nothing; with the tool environment
    # on either side they do
    saved["episode"]["tools"] = ["calculator"]
    assert changed_settings(saved, resolve(None, ["train.lr=0.001"])) == []
    tool = resolve(None, ["train.lr=0.001", "episode.environment=tool", "episode.tools=[python]"])
    assert changed_settings(saved, tool) == ["episode.environment", "episode.tools"]
    # as an environment of the user's takes them (it gets the episode section): asked of its entry, not its name
    saved["episode"]["environment"] = "test_config:plugin_environment"
    assert changed_settings(saved, resolve(None, ["train.lr=0.001", "episode.environment=none"])) == [
        "episode.environment",
        "episode.tools",
    ]
    saved["episode"]["environment"] = "none"
    # a key of an open section the saved run lacked is a change, whatever its value
    assert changed_settings(saved, resolve(None, ["train.lr=0.001", "task.settings.per_band=5"])) == [
        "task.settings.per_band"
    ]
