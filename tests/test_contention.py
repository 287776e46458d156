"""Contention said out loud: the figures by hand, this process's own CPU counted as its own, and a run beside
CPU-bound processes that are not its own warned about in its report's first lines; `--steps N` trains N steps."""

import json
import os
import subprocess
import sys
import time
import warnings

import pytest
import torch

import rlvr
from conftest import make_tiny_llama
from rlvr.config import dump, resolve
from rlvr.training.contention import (
    CpuSnapshot,
    contention_warning,
    emulated_bf16_warning,
    other_cpu,
    run_figures,
    snapshot,
)
from test_pipeline import tiny_model_dir  # noqa: F401  (a fixture)
from test_trainer import tiny_config


def test_other_cpu_by_hand():
    """15 CPU-s busy over 10 s on 2 cores, 5 of them this process tree's: others took 10 of 20 CPU-s, a half."""
    got = other_cpu(CpuSnapshot(100.0, 10.0, 3.0, 2), CpuSnapshot(110.0, 25.0, 8.0, 2))
    assert got == {
        "wall_s": 10.0,
        "cores": 2,
        "busy_cpu_s": 15.0,
        "own_cpu_s": 5.0,
        "other_cpu_s": 10.0,
        "other_share": 0.5,
    }
    # the counters' ticks can put own a hair above busy: clamped at 0, not a negative share
    assert other_cpu(CpuSnapshot(0.0, 1.0, 1.0, 2), CpuSnapshot(1.0, 1.5, 1.51, 2))["other_cpu_s"] == 0.0
    assert other_cpu(None, CpuSnapshot(1.0, 1.5, 1.51, 2)) is None
    figures = run_figures(CpuSnapshot(0.0, 0.0, 0.0, 2), CpuSnapshot(120.0, 120.0, 60.0, 2), steps=6, train_s=120.0)
    assert figures["steps_per_min"] == 3.0 and figures["other_share"] == 0.25
    assert figures["torch_threads"] == torch.get_num_threads()
    assert figures["omp_wait_policy"] == os.environ["OMP_WAIT_POLICY"]
    assert figures["gomp_spincount"] == os.environ.get("GOMP_SPINCOUNT", "")


def test_rlvr_spins_briefly_then_waits_passively_unless_told_otherwise():
    """rlvr sets OMP_WAIT_POLICY=PASSIVE with GOMP_SPINCOUNT=1000 before torch loads OpenMP (a short spin bridges
    back-to-back parallel regions; long spinning takes the cores another process needs), keeps a spin count the user
    set, and leaves a policy the user set as it is (no spin count added: PASSIVE of one's own sleeps at once)."""
    code = (
        "import os, rlvr, torch; "
        "print(os.environ['OMP_WAIT_POLICY'], os.environ.get('GOMP_SPINCOUNT', '-'), rlvr.OMP_WAIT_POLICY_SET_HERE)"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}

    def run(**extra):
        out = subprocess.run([sys.executable, "-c", code], env={**env, **extra}, capture_output=True, text=True)
        return out.stdout.split()

    assert run() == ["PASSIVE", "1000", "True"]
    assert run(GOMP_SPINCOUNT="50") == ["PASSIVE", "50", "True"]
    assert run(OMP_WAIT_POLICY="ACTIVE") == ["ACTIVE", "-", "False"]
    assert run(OMP_WAIT_POLICY="PASSIVE") == ["PASSIVE", "-", "False"]


def test_the_test_process_imports_rlvr_before_torch():
    """The tests run as a user's process does: rlvr's OMP_WAIT_POLICY reaches libgomp only when rlvr is imported
    before torch (tests/conftest.py does so), and rlvr records whether it was. A subprocess shows the record."""
    assert rlvr.TORCH_BEFORE_RLVR is False
    code = "import torch, rlvr; print(rlvr.TORCH_BEFORE_RLVR)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True"]


def test_the_warning_names_its_reason_and_threshold():
    """Each case's words: contended; slow against the user's own figure, with what the run ruled out; computed in
    emulated bf16; and a quiet bf16 machine with no figure of the user's says nothing."""
    busy = {"other_share": 0.5, "other_cpu_s": 10.0, "cores": 2, "wall_s": 10.0, "steps_per_min": 9.0}
    text = contention_warning(busy, quiet_steps_per_min=10.0)
    assert text == (
        "This run was contended: other processes took 50% of the machine's CPU capacity during RL training (10 CPU-s "
        "of 2 cores x 10 s; warned above 25%). A time budget then buys fewer steps and a weaker result; rerun on a "
        "quiet machine, or with `rlvr run --steps N` for a result that does not depend on load."
    )
    assert contention_warning(busy) == text  # contention needs no figure of the user's
    # rlvr's spinning waiters (GOMP_SPINCOUNT, rlvr/__init__.py): the contended run is told how to share
    assert contention_warning({**busy, "gomp_spincount": "1000"}) == text + (
        " Its OpenMP threads spun 1000 times before sleeping (fastest alone); on a machine shared as a rule, "
        "`OMP_WAIT_POLICY=PASSIVE` in the environment makes them sleep at once and keeps more of a run's speed beside "
        "other work."
    )
    assert contention_warning({**busy, "gomp_spincount": ""}) == text  # the user's own policy: nothing to add
    text = contention_warning({**busy, "steps_per_min": 4.0}, quiet_steps_per_min=10.0)
    assert text.startswith("This run was contended: other processes took 50%")
    assert (
        "; it trained 4.0 steps a minute against the 10 of log.quiet_steps_per_min, your figure for a quiet run "
        "(warned below 50% of it)." in text
    )
    # slow against the user's figure, nothing else running, no bf16 emulated: load and dtype ruled out, said so
    slow = {**busy, "other_share": 0.1, "steps_per_min": 4.0, "emulated_bf16": []}
    assert contention_warning(slow, 10.0) == (
        "This run was slow: it trained 4.0 steps a minute against the 10 of log.quiet_steps_per_min, your figure for a "
        "quiet run (warned below 50% of it), while other processes took only 10% of the CPU: not load and not "
        "emulated bf16, so this machine or the work a step does (completion lengths, the rollout and train settings) "
        "differs from the run that figure was measured on. A time budget then buys fewer steps and a weaker result; "
        "`rlvr run --steps N` trains a set number."
    )
    emulated = {**slow, "emulated_bf16": ["rollout.dtype", "train.autocast"]}
    assert contention_warning(emulated, 10.0) == (
        "This run was slow: it trained 4.0 steps a minute against the 10 of log.quiet_steps_per_min, your figure for a "
        "quiet run (warned below 50% of it), while other processes took only 10% of the CPU, and it computed "
        "rollout.dtype, train.autocast in bf16 this CPU emulates: the likely cause (set them to auto). A time budget "
        "then buys fewer steps and a weaker result; `rlvr run --steps N` trains a set number."
    )
    unrecorded = {k: v for k, v in slow.items() if k != "emulated_bf16"}  # a run from before emulated_bf16 was kept
    assert ": not load, so this machine or the work a step does" in contention_warning(unrecorded, 10.0)
    no_proc = {"steps": 4, "train_s": 60.0, "steps_per_min": 4.0, "emulated_bf16": []}  # /proc not readable
    assert (
        "while other processes took an unknown share of the CPU: not emulated bf16, so this machine, its load or the "
        "work a step does (completion lengths" in contention_warning(no_proc, 10.0)
    )
    assert emulated_bf16_warning(emulated) == (
        "This run computed in emulated bf16: rollout.dtype=bfloat16 and train.autocast=bfloat16 on a CPU without bf16 "
        "in hardware (no avx512_bf16 or amx_bf16 in its flags), where torch emulates it, tens of times slower than "
        "float32 (benchmarks/bf16_matmul.py), so a time budget buys far fewer steps; `auto` there picks float32."
    )
    # at least half the user's figure, or no figure of the user's: the run has nothing to call itself slow by
    assert contention_warning({**slow, "steps_per_min": 6.0}, 10.0) is None
    assert contention_warning({**slow, "steps_per_min": 0.1}, 0.0) is None
    assert emulated_bf16_warning(slow) is None and emulated_bf16_warning(unrecorded) is None
    assert contention_warning(None) is None and emulated_bf16_warning(None) is None


def test_no_preset_carries_another_machines_steps_per_minute():
    """A preset's steps-per-minute figure came from one machine and says nothing about this one (issue 64: the default
    preset's 11.5 warned a bf16 CPU that it lacked bf16): log.quiet_steps_per_min is the user's own, 0 in every
    preset, so a quiet run of a preset is warned about only for what it measured itself."""
    from rlvr.presets import CONFIG_PRESETS

    for name in CONFIG_PRESETS.names():
        assert resolve(name)["log"]["quiet_steps_per_min"] == 0.0, name
    quiet = {"other_share": 0.01, "other_cpu_s": 1.0, "cores": 2, "wall_s": 60.0, "steps_per_min": 4.6}
    assert contention_warning({**quiet, "emulated_bf16": []}, resolve("default")["log"]["quiet_steps_per_min"]) is None


@pytest.mark.parametrize("has_bf16", [False, True])
def test_a_run_records_the_bf16_it_emulated_and_its_report_says_so(tmp_path, tokenizer, monkeypatch, has_bf16):
    """rollout.dtype and train.autocast bfloat16 on a CPU without bf16 in hardware (RLVR_NATIVE_BF16=0): the run's
    contention.json names both and its report's first warning says so; on one with it, an empty list and no warning."""
    from rlvr import machine
    from rlvr.training.loop import train
    from rlvr.training.run_report import write_run_report

    monkeypatch.setenv("RLVR_NATIVE_BF16", "1" if has_bf16 else "0")
    machine.native_bf16.cache_clear()
    try:
        cfg = tiny_config(
            tmp_path,
            **{"train.steps": 1, "rollout.backend": "hf", "rollout.dtype": "bfloat16", "train.autocast": "bfloat16"},
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the start-up warnings' own test is tests/test_machine.py
            run = train(cfg, policy=(make_tiny_llama(len(tokenizer)), tokenizer), quiet=True)
    finally:
        machine.native_bf16.cache_clear()
    load = json.loads((run / "contention.json").read_text())
    assert load["emulated_bf16"] == ([] if has_bf16 else ["rollout.dtype", "train.autocast"])
    said = [x for x in write_run_report(run).read_text().splitlines() if "This run computed in emulated bf16" in x]
    assert said == ([] if has_bf16 else [f"> **Warning.** {emulated_bf16_warning(load)}"])


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="reads Linux /proc")
def test_this_process_cpu_is_its_own():
    before = snapshot()
    start = time.process_time()
    while time.process_time() - start < 0.5:  # half a CPU-second in this process
        pass
    after = snapshot()
    assert after.own_s - before.own_s >= 0.4 and after.busy_s - before.busy_s >= 0.4


def _busy_loops(n: int, seconds: int) -> list[int]:
    """n CPU-bound loops outside this process tree (each orphaned by the shell that started it), ending by
    themselves after `seconds`; their pids."""
    code = f"import time\nend = time.time() + {seconds}\nwhile time.time() < end:\n    pass\n"
    pids = []
    for _ in range(n):
        out = subprocess.run(
            ["sh", "-c", f'"{sys.executable}" -c "$0" >/dev/null 2>&1 & echo $!', code],
            capture_output=True,
            text=True,
            check=True,
        )
        pids.append(int(out.stdout.strip()))
    return pids


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="reads Linux /proc")
def test_a_run_beside_busy_processes_warns_and_steps_gives_exactly_n(tmp_path, tiny_model_dir):  # noqa: F811
    from rlvr.cli import main

    cfg = tiny_config(
        tmp_path,
        **{
            "model.name": str(tiny_model_dir),
            "train.steps": 50,
            "train.time_budget_min": 5,
            "eval.n": 2,
            "eval.ks": "[1]",
            "eval.limit": 4,
            "sft.epochs": 1,
            "log.checkpoint_every": 0,
            "log.samples_every": 0,
        },
    )
    (tmp_path / "tiny.yaml").write_text(dump(cfg))
    pids = _busy_loops(os.cpu_count() or 1, seconds=300)
    try:
        code = main(["run", str(tmp_path / "tiny.yaml"), "--steps", "3", "--output-dir", str(tmp_path / "main")])
    finally:
        for pid in pids:
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
    assert code == 0
    root = tmp_path / "main"
    rows = [json.loads(x) for x in (root / "rlvr" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1, 2]  # --steps 3: three steps, no time budget
    assert all(0.0 <= r["time/other_cpu_share"] <= 1.0 for r in rows)
    load = json.loads((root / "rlvr" / "contention.json").read_text())
    assert load["steps"] == 3 and load["other_share"] > 0.25
    head = (root / "report.md").read_text().splitlines()[:4]
    assert head[0] == "# rlvr run report" and head[2].startswith("> **Warning.** This run was contended")


def test_steps_and_budget_together_are_refused(capsys):
    from rlvr.cli import main

    with pytest.raises(SystemExit) as e:
        main(["run", "--steps", "3", "--budget", "2"])
    assert e.value.code == 2 and "not allowed with argument" in capsys.readouterr().err
    assert main(["run", "--steps", "0"]) == 2
    assert capsys.readouterr().err == "rlvr run: --steps must be at least 1, got 0\n"
