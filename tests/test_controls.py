"""Control rewards: Bernoulli at the policy's own success rate, the format term alone; the real verifier's verdicts
kept; the main job's control runs and the report's rows for them, on the tiny model."""

import json

import pytest

from rlvr.config import ConfigError, RewardConfig
from rlvr.tasks.base import Problem
from rlvr.verifiers.base import Verdict
from rlvr.verifiers.controls import CONTROLS, Control, ControlReward, control_reward, random_at_rate
from test_pipeline import tiny_model_dir  # noqa: F401  (a fixture)
from test_trainer import tiny_config


def verdicts(statuses):
    return [Verdict(s, float(s == "correct"), None) for s in statuses]


def test_random_at_rate():
    texts = [f"t{i}" for i in range(2000)]
    draws = random_at_rate(verdicts(["correct"] * 600 + ["wrong"] * 1400), seed=0, texts=texts)
    assert set(draws) == {0.0, 1.0} and abs(sum(draws) / 2000 - 0.3) < 0.03  # p = 0.3; sd of the mean 0.01
    assert draws == random_at_rate(verdicts(["correct"] * 600 + ["wrong"] * 1400), seed=0, texts=texts)
    assert draws != random_at_rate(verdicts(["correct"] * 600 + ["wrong"] * 1400), seed=1, texts=texts)
    assert draws != random_at_rate(verdicts(["correct"] * 600 + ["wrong"] * 1400), seed=0, texts=texts[::-1])
    assert random_at_rate(verdicts(["wrong", "no_answer"]), 0, ["a", "b"]) == [0.0, 0.0]  # p = 0: never paid
    assert random_at_rate(verdicts(["correct"] * 3), 0, ["a", "b", "c"]) == [1.0, 1.0, 1.0]
    assert random_at_rate([], 0, []) == []


def _arithmetic_reward():
    from rlvr.tasks import load_task
    from rlvr.verifiers.compose import task_reward

    return task_reward(RewardConfig(workers=0, timeout_s=5.0), load_task("arithmetic", per_band=5))[1]


def test_format_only_pays_the_box_and_keeps_the_real_verdicts():
    reward = _arithmetic_reward()  # math (number form) + boxed format at 0.1
    gold = Problem(id="g", prompt="?", answer="12", band="b")
    texts = ["so \\boxed{5}", "it is 12", "\\boxed{12}"]
    real = reward(texts, [gold] * 3)
    got = control_reward(reward, "format_only", seed=0)(texts, [gold] * 3)
    assert [v.status for v in got.verdicts] == [v.status for v in real.verdicts] == ["wrong", "no_answer", "correct"]
    assert got.total == [1.0, 0.0, 1.0] and got.terms["control"] == [1.0, 0.0, 1.0]
    assert real.total == pytest.approx([0.1, 0.0, 1.1])  # the real reward: the answer counts


def test_random_rate_pays_at_the_batch_success_rate():
    reward = _arithmetic_reward()
    gold = Problem(id="g", prompt="?", answer="12", band="b")
    texts = ["\\boxed{12}", "\\boxed{12}.", "\\boxed{3}", "\\boxed{4}"]
    got = control_reward(reward, "random_rate", seed=7)(texts, [gold] * 4)
    assert [v.status for v in got.verdicts] == ["correct", "correct", "wrong", "wrong"]
    assert got.total == random_at_rate(got.verdicts, 7, texts)  # Bernoulli(1/2) draws, seeded by the texts


class HalfPay(ControlReward):
    """A plug-in control (reward.control: test_controls:HalfPay): half the real total."""

    def control_total(self, real, completions):
        return [t / 2 for t in real.total]


def test_none_is_the_real_reward_and_every_other_reward_control_wraps_it():
    reward = _arithmetic_reward()
    assert CONTROLS.names() == ("none", "random_rate", "format_only", "no_tools")
    assert [name for name in CONTROLS if CONTROLS.get(name).wraps] == ["random_rate", "format_only"]
    assert [name for name in CONTROLS if CONTROLS.get(name).single_turn] == [
        "no_tools"
    ]  # the episode's, not the reward's
    assert [name for name in CONTROLS if CONTROLS.get(name).on_reward] == ["none", "random_rate", "format_only"]
    assert [name for name in CONTROLS if CONTROLS.get(name).is_control_run] == [
        "random_rate",
        "format_only",
        "no_tools",
    ]
    assert control_reward(reward, "no_tools", seed=0) is reward  # a no_tools run trains on the real reward
    assert control_reward(reward, "none", seed=0) is reward
    assert isinstance(control_reward(reward, "random_rate", seed=0), ControlReward)
    with pytest.raises(ConfigError, match=r"^reward.control: unknown reward control 'coin'; choose from none, "):
        control_reward(reward, "coin", seed=0)


def test_a_plugin_control_wraps_the_reward_as_a_builtin_does():
    reward = _arithmetic_reward()
    assert CONTROLS.get("test_controls:HalfPay") == Control(HalfPay)
    gold = Problem(id="g", prompt="?", answer="12", band="b")
    got = control_reward(reward, "test_controls:HalfPay", seed=0)(["\\boxed{12}", "\\boxed{3}"], [gold] * 2)
    assert got.total == pytest.approx([0.55, 0.05]) and [v.status for v in got.verdicts] == ["correct", "wrong"]
    with pytest.raises(ConfigError, match=r"reward.control='math:pi' is not a class or function"):
        CONTROLS.get("math:pi")


def test_a_run_config_takes_a_plugin_control(tmp_path):
    """reward.control: package.module:attr passes the config's check (as a plug-in of any registry does) and the run's
    reward is the plug-in's wrapper of the real one."""
    from rlvr.training.step import check_components

    parts = check_components(tiny_config(tmp_path, **{"reward.control": "test_controls:HalfPay"}))
    assert isinstance(parts.reward, HalfPay)


def test_eval_controls_take_the_registry_s_control_runs_and_a_plugin(tmp_path):
    """eval.controls names CONTROLS' entries that change something: what a control run changes is its entry's field
    (single_turn: the episode; else reward.control), so a plug-in control runs as random_rate does."""
    from rlvr.config import as_config, resolve
    from rlvr.training.controls import control_cfg, control_eval_cfg, single_turn
    from rlvr.training.lifecycle import check_registered, registered_names

    assert registered_names("eval.controls") == ["random_rate", "format_only", "no_tools"]
    assert registered_names("reward.control") == ["none", "random_rate", "format_only"]
    cfg = check_registered(as_config(resolve(None, ["eval.controls=[test_controls:HalfPay, random_rate]"])))
    assert cfg.eval.controls == ["test_controls:HalfPay", "random_rate"]
    assert [single_turn(kind) for kind in ("test_controls:HalfPay", "random_rate", "format_only", "no_tools")] == [
        False,
        False,
        False,
        True,
    ]
    sub = control_cfg(cfg, tmp_path, "test_controls:HalfPay")
    assert sub.reward.control == "test_controls:HalfPay" and sub.output_dir == str(
        tmp_path / "control-test_controls:HalfPay"
    )
    assert (
        control_eval_cfg(cfg, "test_controls:HalfPay") is cfg
    )  # evaluated by the real grader, with the episode's tools
    with pytest.raises(
        ConfigError, match=r"^eval.controls='test_controls:Nope': module 'test_controls' has no attribute"
    ):
        single_turn("test_controls:Nope")


def test_rlvr_serve_notes_a_control_run_and_serves_its_real_reward(tmp_path):
    from rlvr.config import as_config
    from rlvr.serve.scoring import config_notes

    assert config_notes(as_config({"output_dir": str(tmp_path), "reward": {"control": "none"}})) == []
    assert config_notes(as_config({"output_dir": str(tmp_path), "reward": {"control": "random_rate"}})) == [
        "reward.control random_rate is a control run's stand-in reward; served: the real reward its verdicts come from"
    ]


def test_a_control_that_cannot_apply_is_a_config_error(tmp_path):
    from rlvr.training.step import check_components

    with pytest.raises(ConfigError, match="reward.control=format_only: the reward has no format term"):
        check_components(tiny_config(tmp_path, **{"reward.control": "format_only"}))  # a regex reward alone
    with pytest.raises(ConfigError, match="^config key 'reward.control' = 'coin'; choose from none, random_rate"):
        check_components(tiny_config(tmp_path, **{"reward.control": "coin"}))  # CONTROLS' names


def test_a_control_that_cannot_apply_stops_the_main_job_before_it_starts(tmp_path, tiny_model_dir):  # noqa: F811
    from rlvr.training.main_job import run_main

    cfg = tiny_config(
        tmp_path,
        **{"model.name": str(tiny_model_dir), "output_dir": str(tmp_path / "main"), "eval.controls": "[format_only]"},
    )  # the regex reward has no format term
    with pytest.raises(ConfigError, match="reward.control=format_only: the reward has no format term"):
        run_main(cfg, quiet=True)
    assert not (tmp_path / "main").exists()


def test_the_main_job_trains_and_reports_its_controls(tmp_path, tiny_model_dir):  # noqa: F811
    from rlvr.training.main_job import run_main

    terms = (
        '[{name: first_char, kind: regex, weight: 1.0, pattern: "^\\\\s*(\\\\S)", gold_is_pattern: true}, '
        "{name: format, kind: boxed_format, weight: 0.1}]"
    )
    cfg = tiny_config(
        tmp_path,
        **{
            "model.name": str(tiny_model_dir),
            "output_dir": str(tmp_path / "main"),
            "reward.terms": terms,
            "train.steps": 2,
            "eval.n": 2,
            "eval.ks": "[1]",
            "eval.limit": 4,
            "sft.epochs": 1,
            "eval.controls": "[random_rate, format_only]",
        },
    )
    run_main(cfg, quiet=True)
    root = tmp_path / "main"
    rlvr_rows = (root / "rlvr" / "metrics.jsonl").read_text().splitlines()
    report = (root / "report.md").read_text()
    assert "## Controls" in report and "![training curves: RLVR and its controls](plots/controls.png)" in report
    for kind in ("random_rate", "format_only"):
        run = root / f"control-{kind}"
        rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
        assert len(rows) == len(rlvr_rows) == 2 and (run / "final" / "merged" / "config.json").exists()
        assert all(r["reward/mean"] == pytest.approx(r["reward/control/mean"]) for r in rows)
        result = json.loads((root / f"compare-control-{kind}.json").read_text())
        assert result["baseline"] == f"control-{kind}" and result["models"] == [f"control-{kind}", "rlvr"]
        d = result["diffs"]["rlvr"]["all"]
        assert f"| all | {kind} | " in report and f"{d['diff']:+.3f} [{d['lo']:+.3f}, {d['hi']:+.3f}]" in report
    fmt = [json.loads(x) for x in (root / "control-format_only" / "metrics.jsonl").read_text().splitlines()]
    assert all(r["reward/control/mean"] == pytest.approx(r["reward/format/mean"]) for r in fmt)
    assert (root / "plots" / "controls.png").exists()
    # a rerun redoes nothing: the wall-time line names every phase, the controls' too, as read back
    line = run_main(cfg, quiet=True)["wall_line"]
    read_back = line.split(" in this invocation; read back from an earlier one: ")[1].split(", ")
    names = [x.split(" (")[0] for x in read_back]
    assert names[:5] == ["eval start", "train rlvr", "train sft", "eval sft", "eval rlvr"]
    assert set(names[5:]) == {f"{p} control-{k}" for p in ("train", "eval") for k in ("random_rate", "format_only")}
