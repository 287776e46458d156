"""The process group's backend (rlvr.training.distributed.choose_backend, RLVR_DIST_BACKEND) and the group of one
that the variable makes under a launcher: the update's collectives then run through it, as benchmarks/gpu_check.sh
does with NCCL on one GPU; here on gloo."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch.distributed as dist

from rlvr.errors import ConfigError
from rlvr.training import distributed
from test_distributed import free_port

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    "asked, cuda, backend",
    [
        ("", False, "gloo"),  # unset: what the machine has
        ("", True, "nccl"),
        ("gloo", True, "gloo"),  # asked for: a CPU group on a GPU machine
        ("nccl", True, "nccl"),
    ],
)
def test_choose_backend(asked, cuda, backend):
    assert distributed.choose_backend(asked, cuda) == backend


@pytest.mark.parametrize(
    "asked, cuda, message",
    [
        ("nccl", False, "RLVR_DIST_BACKEND=nccl: CUDA is not available in this process; use gloo or unset it"),
        ("mpi", True, "RLVR_DIST_BACKEND=mpi: choose gloo or nccl (unset: nccl where CUDA is available, else gloo)"),
    ],
)
def test_choose_backend_refuses(asked, cuda, message):
    with pytest.raises(ConfigError) as e:
        distributed.choose_backend(asked, cuda)
    assert str(e.value) == message


def test_the_variable_alone_makes_no_group(monkeypatch):
    """Outside a launcher (no WORLD_SIZE) the variable changes nothing: one process, no group, no-op collectives."""
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.setenv("RLVR_DIST_BACKEND", "gloo")
    comm = distributed.setup()
    assert (comm.world, comm.grouped, dist.is_initialized()) == (1, False, False)
    assert comm.all_sum(3) == [3]


def test_a_launched_world_of_one_runs_the_update_through_its_group():
    """benchmarks/gpu_check_update.py in the environment torchrun gives one process, on gloo: the eight update cases
    of the data-parallel tests, every collective through the group, equal the single-process update exactly."""
    env = {**os.environ, "RLVR_DIST_BACKEND": "gloo", "WORLD_SIZE": "1", "RANK": "0", "LOCAL_RANK": "0"}
    env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), OMP_NUM_THREADS="1")
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu_check_update.py")], env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stdout + out.stderr[-2000:]
    result = json.loads(out.stdout.splitlines()[-1])
    assert result.pop("all_reduces") > 0  # how many the update makes is its own business; none would prove nothing
    assert result == {
        "backend": "gloo",
        "world": 1,
        "cases": 8,
        "loss_gap": 0.0,
        "grad_norm_gap": 0.0,
        "weight_gap": 0.0,
        "ok": True,
    }
