"""rlvr: reinforcement learning with verifiable rewards.

The Python API, each function what its verb does (the same run directory, the same files):

    from rlvr import resolve, train, sft, run_main
    cfg = resolve("default", ["train.steps=20", "output_dir=runs/api"])   # a preset or YAML file, with --set's
    train(cfg)                 # rlvr train: config.yaml, metrics.jsonl, checkpoints/, final/, report.md, plots/
    sft(cfg)                   # rlvr sft;   run_main(cfg): rlvr run

A dict is checked as the command line checks a file (rlvr.config.as_config). Heavy parts (torch, transformers,
math-verify) are imported by the modules that need them, and these names when first used (`__getattr__` below),
so `import rlvr` stays cheap and sets the environment below before torch loads.
"""

import importlib
import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the lazy names below, as type checkers see them
    from rlvr.config import Config, as_config, resolve
    from rlvr.tasks import load_task
    from rlvr.training.loop import train
    from rlvr.training.main_job import run_main
    from rlvr.training.sft import sft

__version__ = "0.1.0"

# oneDNN (torch's CPU matmuls) keeps up to 1,024 compiled primitives, one per matmul shape, and an update
# meets a new set of shapes every micro-batch: the cache held ~0.35 GB by the eighth replayed update of the
# bench shape. At 64 the peak RSS of those replays fell from 3.13-3.22 to 2.76-2.87 GB, for ~0.1-0.2 s a step
# of rebuilt primitives in the update and the sampler (docs/performance.md; 1024 in the environment buys the
# time back). Read when oneDNN makes its first primitive; a value the user set is kept.
ONEDNN_CACHE_SET_HERE = "ONEDNN_PRIMITIVE_CACHE_CAPACITY" not in os.environ
os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "64")

# OpenMP threads (torch's intra-op pool) that find no work spin 1,000 times (about 10 microseconds), then sleep.
# Spinning until the next parallel region (libgomp's default: about 3 ms) keeps a core busy while it waits: beside
# another CPU-bound process (a second run, a browser, a CPU hog) the spinning threads take the cores the other's need.
# Sleeping at once (OMP_WAIT_POLICY=PASSIVE alone) shares best but puts a futex wake-up between back-to-back parallel
# regions, and a bf16 update is thousands of short ones: the default step on the AVX512-BF16 EPYC took 10.75 s
# passive against 6.92 s with 1,000 spins (as fast as 3 ms of spinning); beside a second run each kept 48% of its quiet
# speed against passive's 83%, beside a CPU hog 49% against 86% (benchmarks/contention.py, docs/performance.md,
# "Sharing the CPU"). A shared machine sets OMP_WAIT_POLICY=PASSIVE itself, and the run's report says so when other
# processes took the CPU. Read by libgomp when torch first loads it, so it must be set before torch is imported; a
# policy or spin count the user set is kept (with PASSIVE set by the user, libgomp does not spin).
OMP_WAIT_POLICY_SET_HERE = "OMP_WAIT_POLICY" not in os.environ
if OMP_WAIT_POLICY_SET_HERE:
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"  # passive after the spin, and no spinning at all when oversubscribed
    os.environ.setdefault("GOMP_SPINCOUNT", "1000")
# True when torch was imported before rlvr: then libgomp has read the environment already and the policy above does
# not apply to this process (tests/conftest.py imports rlvr first for that reason).
TORCH_BEFORE_RLVR = "torch" in sys.modules

# The Python API: name -> the module that defines it, imported on first use.
API = {
    "train": "rlvr.training.loop",
    "sft": "rlvr.training.sft",
    "run_main": "rlvr.training.main_job",
    "load_task": "rlvr.tasks",
    "resolve": "rlvr.config",
    "as_config": "rlvr.config",
    "Config": "rlvr.config",
}
__all__ = ["train", "sft", "run_main", "load_task", "resolve", "as_config", "Config", "__version__"]


def __getattr__(name: str) -> Any:
    if name in API:
        return getattr(importlib.import_module(API[name]), name)
    raise AttributeError(f"module 'rlvr' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *API])
