"""rlvr: reinforcement learning with verifiable rewards.

Heavy parts (torch, transformers, math-verify) are imported by the modules that need them, so
`import rlvr` stays cheap.
"""

__version__ = "0.1.0"
