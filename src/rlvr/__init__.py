"""rlvr: reinforcement learning with verifiable rewards.

Heavy parts (torch, transformers, math-verify) are imported by the modules that need them, so
`import rlvr` stays cheap.
"""

import os
import sys

__version__ = "0.1.0"

# oneDNN (torch's CPU matmuls) keeps up to 1,024 compiled primitives, one per matmul shape, and an update
# meets a new set of shapes every micro-batch: the cache held ~0.35 GB by the eighth replayed update of the
# bench shape. At 64 the peak RSS of those replays fell from 3.13-3.22 to 2.76-2.87 GB, for ~0.1-0.2 s a step
# of rebuilt primitives in the update and the sampler (docs/performance.md; 1024 in the environment buys the
# time back). Read when oneDNN makes its first primitive; a value the user set is kept.
ONEDNN_CACHE_SET_HERE = "ONEDNN_PRIMITIVE_CACHE_CAPACITY" not in os.environ
os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "64")

# OpenMP threads (torch's intra-op pool) that find no work sleep at once instead of spinning first. Spinning threads
# keep a core busy while they wait; beside another CPU-bound process (a second run, a browser, a CPU hog) they take
# the cores the other process's threads need, and each side's parallel regions wait on a descheduled partner. On the
# 2-core machine, one sampling call of the default model took 5.9 s alone and 21 s with a second one beside it
# (28%), 17.7 s beside a CPU hog; passive: 8.3 s side by side (71%), 8.7 s beside the hog, up to 5% slower alone,
# the same samples (benchmarks/contention_sampling.py, docs/performance.md). Read by libgomp when torch first loads
# it, so it must be set before torch is imported; a value the user set (ACTIVE for a dedicated machine) is kept.
OMP_WAIT_POLICY_SET_HERE = "OMP_WAIT_POLICY" not in os.environ
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# True when torch was imported before rlvr: then libgomp has read the environment already and the policy above does
# not apply to this process (tests/conftest.py imports rlvr first for that reason).
TORCH_BEFORE_RLVR = "torch" in sys.modules
