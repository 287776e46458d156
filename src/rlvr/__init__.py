"""rlvr: reinforcement learning with verifiable rewards.

Heavy parts (torch, transformers, math-verify) are imported by the modules that need them, so
`import rlvr` stays cheap.
"""

import os

__version__ = "0.1.0"

# oneDNN (torch's CPU matmuls) keeps up to 1,024 compiled primitives, one per matmul shape, and an update
# meets a new set of shapes every micro-batch: the cache held ~0.35 GB by the eighth replayed update of the
# bench shape. At 64 the peak RSS of those replays fell from 3.13-3.22 to 2.76-2.87 GB, for ~0.1-0.2 s a step
# of rebuilt primitives in the update and the sampler (docs/performance.md; 1024 in the environment buys the
# time back). Read when oneDNN makes its first primitive; a value the user set is kept.
ONEDNN_CACHE_SET_HERE = "ONEDNN_PRIMITIVE_CACHE_CAPACITY" not in os.environ
os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "64")
