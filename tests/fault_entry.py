"""Fault injection for tests/test_reliability.py: a reward kind that misbehaves on purpose, and a script entry
that registers it and runs the ordinary `rlvr` command line in a child process.

The kind `faulty_regex` scores exactly like `regex`, except:
- settings `plan` (a list of "sleep" | "exit") and `plan_dir`: the k-th item scored anywhere in the run (any
  worker process) claims plan[k] by creating plan_dir/k exclusively, then sleeps forever or calls os._exit(3);
  so a run sees each fault exactly once, whichever worker draws it;
- environment RLVR_TEST_SIGNAL="TERM@n" or "KILL@n": the n-th call (0-based) in this process sends that
  signal to this process. A real OS signal at a chosen point, so a "kill mid-run" test is deterministic.
- environment RLVR_TEST_SFT_SIGNAL="KILL@n": the same at the start of SFT's n-th optimizer step (0-based).

Usage as a script: python tests/fault_entry.py train CONFIG [--resume ...]  (PYTHONPATH must hold src/).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

KIND = "faulty_regex"


class FaultyRegex:
    name = KIND

    def __init__(self, pattern: str, gold_is_pattern: bool = False, plan=(), plan_dir: str | None = None):
        from rlvr.verifiers.simple import RegexVerifier

        self.inner = RegexVerifier(pattern=pattern, gold_is_pattern=gold_is_pattern)
        self.plan, self.plan_dir = list(plan), plan_dir
        self.calls = 0

    def _claim(self) -> str | None:
        for k, fault in enumerate(self.plan):
            try:
                os.close(os.open(Path(self.plan_dir) / str(k), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
                return fault
            except FileExistsError:
                continue
        return None

    def _maybe_signal(self) -> None:
        spec = os.environ.get("RLVR_TEST_SIGNAL")
        if spec:
            name, at = spec.split("@")
            if self.calls == int(at):
                os.kill(os.getpid(), getattr(signal, f"SIG{name}"))

    def score(self, completion, problem):
        self._maybe_signal()
        self.calls += 1
        fault = self._claim() if self.plan else None
        if fault == "sleep":
            while True:  # a C-level sleep: the in-worker deadline cannot interrupt it, only the pool's kill
                time.sleep(3600)
        if fault == "exit":
            os._exit(3)
        return self.inner.score(completion, problem)


def register() -> None:
    from rlvr.verifiers.registry import register_kind

    register_kind(
        KIND,
        FaultyRegex,
        ("pattern", "gold_is_pattern", "plan", "plan_dir"),
        doc="regex with injected faults (tests only)",
    )


def signal_at_sft_step() -> None:
    """RLVR_TEST_SFT_SIGNAL="NAME@n": SFT's step n sends the signal to this process before it starts."""
    spec = os.environ.get("RLVR_TEST_SFT_SIGNAL")
    if not spec:
        return
    from rlvr.training import sft

    name, at = spec.split("@")
    step, calls = sft.sft_step, {"n": 0}

    def wrapped(*args, **kw):
        if calls["n"] == int(at):
            os.kill(os.getpid(), getattr(signal, f"SIG{name}"))
        calls["n"] += 1
        return step(*args, **kw)

    sft.sft_step = wrapped


if __name__ == "__main__":
    register()
    signal_at_sft_step()
    from rlvr.cli import main

    sys.exit(main(sys.argv[1:]))
