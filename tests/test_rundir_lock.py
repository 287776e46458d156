"""One live process per run directory (rlvr.rundir.files): a second run, or --overwrite of a run that is still
stopping, is refused with the holder's pid; a folder replaced under a live run gets nothing more of it."""

import os
import shutil
import subprocess
import sys
import time

import pytest

from rlvr.rundir.files import LOCK_FILE, RunDir, RunDirError, check_output_dir

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="flock")


def hold_in_another_process(path):
    """A child that opens RunDir(path) (as a run does) and waits; returns it once the lock is taken."""
    code = (
        "import sys, time\nfrom rlvr.rundir.files import RunDir\n"
        f"run = RunDir({str(path)!r}, resume={(path / 'config.yaml').exists()})\n"
        "print('held', flush=True)\ntime.sleep(120)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "held"
    return child


def test_a_live_run_keeps_others_out_and_a_dead_one_does_not(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("seed: 0\n")
    child = hold_in_another_process(run)
    try:
        for kwargs in ({"overwrite": True}, {"resume": True}):
            with pytest.raises(RunDirError, match=rf"in use by a running rlvr process \(pid {child.pid}\)"):
                RunDir(run, **kwargs)
            with pytest.raises(RunDirError, match=rf"pid {child.pid}"):
                check_output_dir(run, **kwargs)
        assert (run / "config.yaml").read_text() == "seed: 0\n"  # nothing removed
    finally:
        child.kill()
        child.wait()
    # the holder is gone: its lock file is stale and locks nothing
    assert int((run / LOCK_FILE).read_text()) == child.pid
    RunDir(run, resume=True)
    assert sorted(p.name for p in run.iterdir()) == [LOCK_FILE, "config.yaml"]
    assert int((run / LOCK_FILE).read_text()) == os.getpid()


def test_a_main_job_phase_holding_a_subfolder_keeps_the_root_from_being_overwritten(tmp_path):
    root = tmp_path / "main"
    (root / "rlvr").mkdir(parents=True)
    child = hold_in_another_process(root / "rlvr")
    try:
        with pytest.raises(RunDirError, match=rf"{root} is in use .*pid {child.pid}"):
            RunDir(root, overwrite=True)
        assert (root / "rlvr" / LOCK_FILE).exists()
    finally:
        child.kill()
        child.wait()
    RunDir(root, overwrite=True)


def test_this_process_may_reopen_its_own_run(tmp_path):
    first = RunDir(tmp_path / "run")
    (tmp_path / "run" / "config.yaml").write_text("seed: 0\n")
    again = RunDir(tmp_path / "run", resume=True)  # e.g. a resume in the same process after a caught crash
    again.append(again.metrics_path, [{"step": 0}])
    assert first.path == again.path


def test_a_folder_replaced_under_a_live_run_gets_nothing_more(tmp_path):
    run = RunDir(tmp_path / "run")
    run.append(run.metrics_path, [{"step": 0}])
    shutil.rmtree(run.path)
    time.sleep(0.01)
    run.path.mkdir()
    (run.path / "config.yaml").write_text("another run\n")
    with pytest.raises(RunDirError, match="was removed or replaced while this run was writing to it"):
        run.append(run.metrics_path, [{"step": 1}])
    assert sorted(p.name for p in run.path.iterdir()) == ["config.yaml"]
