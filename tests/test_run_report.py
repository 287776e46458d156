"""A training run's own report (rlvr.training.run_report): `rlvr train` leaves RUN/report.md and RUN/plots/*.png when
training ends, and after a stop by Ctrl-C; the report's warnings are the main job's, its numbers metrics.jsonl's."""

import json
import os
import signal
import time

from rlvr.config import dump, resolve
from rlvr.training.run_report import figures_markdown, write_run_report
from test_trackers import cli_train, jsonl


def mean(values):
    return sum(values) / len(values)


def hand_made_run(path, steps=7):
    """A run directory as a contended run with a broken sampler leaves it: mismatch/k3_kl 0.2 a step (a healthy run
    measures 0.001-0.006), and other processes took 60% of the CPU while it trained."""
    path.mkdir(parents=True)
    rows = [
        {
            "step": s,
            "reward/mean": 0.1 * s,
            "verdict/correct_frac": 0.05 * s,
            "groups/nonzero_var_frac": 0.5,
            "verdict/no_answer_frac": 0.25,
            "len/mean": 40.0 + s,
            "len/truncated_frac": 0.0,
            "mismatch/k3_kl": 0.2,
            "mismatch/abs_log_ratio": 0.3,
            "mismatch/max_ratio": 4.0,
            "mismatch/outside_frac": 0.1,
            **({"val/accuracy": 0.25 + 0.1 * s} if s % 3 == 0 else {}),
        }
        for s in range(steps)
    ]
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (path / "config.yaml").write_text(dump(resolve(None, [f"output_dir={path}", "train.steps=10"])))
    load = {"steps": steps, "train_s": 140.0, "steps_per_min": 3.0, "wall_s": 140.0, "cores": 2}
    load.update({"busy_cpu_s": 280.0, "own_cpu_s": 112.0, "other_cpu_s": 168.0, "other_share": 0.6})
    (path / "contention.json").write_text(json.dumps(load))
    return rows


def test_the_report_of_a_run_directory_warns_first_and_shows_its_own_figures(tmp_path):
    run = tmp_path / "run"
    hand_made_run(run)
    path = write_run_report(run)
    assert path == run / "report.md"
    text = path.read_text()
    head = text.split("## What was run")[0]
    assert text.startswith("# rlvr train report: run\n")
    assert "> **Warning.** This run was contended: other processes took 60% of the machine's CPU capacity" in head
    assert (
        "> **Warning.** The sampler and the trainer disagree on the trained tokens: k3 KL(sampler || trainer) "
        "averaged 0.2 over 7 steps" in head
    )
    assert "- **steps**: 7 of train.steps 10\n" in text  # no final/: nothing about a card
    assert "- **training load**: 7 steps in 2.3 min (3.0 steps/min); other processes took 60% of the 2 cores'" in text
    # first five steps and last five: reward 0.0-0.4 -> 0.2, 0.2-0.6 -> 0.4; validation at steps 0, 3, 6
    assert "| reward (`reward/mean`) | 0.2 | 0.4 | 7 |" in text
    assert "| mean length (tokens) (`len/mean`) | 42 | 44 | 7 |" in text
    assert "| validation accuracy (greedy) (`val/accuracy`) | 0.55 | 0.55 | 3 |" in text
    assert "entropy" not in text.split("## Plots")[0]  # a figure the run did not log has no row
    for name in ("training", "mismatch"):
        assert (run / "plots" / f"{name}.png").stat().st_size > 10_000
        assert f"(plots/{name}.png)" in text
    assert not (run / "plots" / "episodes.png").exists()  # a single-turn run has no tool-use plot


def test_figures_are_means_over_the_steps_that_logged_them():
    rows = [{"step": s, "reward/mean": float(s)} for s in range(12)] + [{"step": 12}]
    table = figures_markdown(rows)
    assert "| reward (`reward/mean`) | 2 | 9 | 12 |" in table  # steps 0-4 and 7-11
    assert table.count("\n") == 2  # header, rule, one row: nothing else was logged


def test_rlvr_train_writes_its_report_and_plots_when_training_ends(tmp_path, model_dir, capsys):
    run, before = tmp_path / "R", time.time()
    assert cli_train(tmp_path, model_dir) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert f"report: {run / 'report.md'}" in out
    rows = jsonl(run / "metrics.jsonl")
    assert [r["step"] for r in rows] == [0, 1, 2]
    walls = [r["time/wall"] for r in rows]  # each line's own time: the trackers' time axis
    assert before < walls[0] < walls[1] < walls[2] < time.time()
    text = (run / "report.md").read_text()
    reward = mean([r["reward/mean"] for r in rows])  # three steps: first five and last five are all of them
    assert f"| reward (`reward/mean`) | {reward:.4g} | {reward:.4g} | 3 |" in text
    assert (
        f"- **steps**: 3 of train.steps 3; the model and its card are in final/ (final/README.md); "
        f"`rlvr eval --model {run}` evaluates it" in text
    )
    assert (run / "plots" / "training.png").stat().st_size > 10_000 and "(plots/training.png)" in text


def test_a_run_stopped_by_ctrl_c_still_gets_its_report(tmp_path, model_dir, capsys, monkeypatch):
    """SIGINT during step 1: the loop finishes the step, checkpoints, exits 130; the report covers steps 0-1 and
    says how to continue."""
    from rlvr.training import loop

    real = loop.run_step

    def interrupted(state, step, **kw):
        result = real(state, step, **kw)
        if step == 1:
            os.kill(os.getpid(), signal.SIGINT)  # caught by the loop's StopFlag, as a real Ctrl-C
        return result

    monkeypatch.setattr(loop, "run_step", interrupted)
    run = tmp_path / "R"
    try:
        code = cli_train(tmp_path, model_dir, "train.steps=5")
    except SystemExit as e:  # the signal's exit, as the command line leaves it
        code = e.code
    assert code == 130
    text = (run / "report.md").read_text()
    assert [r["step"] for r in jsonl(run / "metrics.jsonl")] == [0, 1]
    assert f"- **steps**: 2 of train.steps 5; stopped by SIGINT (Ctrl-C); `rlvr train --resume {run}` continues" in text
    assert (run / "plots" / "training.png").exists()
    assert f"report: {run / 'report.md'}" in capsys.readouterr().out


def test_a_run_refused_at_start_leaves_the_folder_it_found_without_a_report(tmp_path, model_dir, capsys):
    """Only the run's own end writes a report: `rlvr train` into a run directory that exists (no --overwrite) exits 2
    and writes nothing into it, though the folder holds another run's metrics."""
    hand_made_run(tmp_path / "R")
    assert cli_train(tmp_path, model_dir) == 2
    assert "exists" in capsys.readouterr().err
    assert not (tmp_path / "R" / "report.md").exists() and not (tmp_path / "R" / "plots").exists()


def test_the_python_api_trains_as_rlvr_train_does(tmp_path, model_dir, capsys):
    """`from rlvr import train` is the documented import (rlvr.training.loop.train): a dict run through it leaves the
    files `rlvr train` leaves for the same config, report.md and plots/ included, with the same figures table."""
    import rlvr
    from rlvr import train
    from test_trackers import cli_sets

    assert train is rlvr.training.loop.train
    assert cli_train(tmp_path, model_dir) == 0, capsys.readouterr().err
    api = tmp_path / "A"
    assert train(resolve(None, [*cli_sets(tmp_path, model_dir), f"output_dir={api}"]), quiet=True) == api
    assert f"report: {api / 'report.md'}" in capsys.readouterr().out

    def files(run):
        return sorted(str(p.relative_to(run)) for p in run.rglob("*") if p.is_file())

    cli = tmp_path / "R"
    assert files(api) == files(cli)
    assert {"report.md", "plots/training.png", "contention.json", "final/README.md"} <= set(files(api))
    table = [(run / "report.md").read_text().split("## Training figures")[1].split("## Plots")[0] for run in (api, cli)]
    assert table[0] == table[1]  # the same seed and config: the same steps, so the same figures
    assert "| reward (`reward/mean`) |" in table[0]


def test_the_api_names_load_when_first_used():
    """`import rlvr` stays light (it must set OMP_WAIT_POLICY before torch loads, rlvr/__init__.py): the API's names
    are imported on first use, so `from rlvr import train` is the first thing that loads torch."""
    import subprocess
    import sys

    import rlvr

    assert set(rlvr.__all__) == {*rlvr.API, "__version__"} and "train" in dir(rlvr)
    code = (
        "import os, sys, rlvr; light = 'torch' not in sys.modules; from rlvr import train, resolve, load_task; "
        "print(light, 'torch' in sys.modules, rlvr.TORCH_BEFORE_RLVR, train.__module__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "True", "False", "rlvr.training.loop"]
