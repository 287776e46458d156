"""What every comparison's parent process shares: a child process as a `Worker` (the parent's end of the line protocol,
rlvr_bench.workers), its failure as `BenchError`, the check that a peer's venv has its packages, the FLOP-ceiling
probe, the CPU kind (`machine`), and the print-or-fail ending of a benchmark.

Below the verbs' modules (bench, rollouts, time_to_accuracy), which import it; it imports only rlvr_bench.child, so
the harness's modules import one another without a circle.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rlvr_bench.child import PREFIX


class BenchError(RuntimeError):
    """A child process failed; the message carries the tail of its log."""


def check_peer_python(python: str, packages: dict[str, str], recipe: str, timeout_s: float = 600.0) -> str | None:
    """None when `python` imports every module of `packages` (import name -> pip name); else why not, naming the
    missing pip packages and how to install them, so a peer's venv fails in seconds and not after a model load."""
    probe = f"import importlib.util, json; print(json.dumps([m for m in {list(packages)!r} if importlib.util.find_spec(m) is None]))"
    try:
        proc = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=timeout_s)
    except FileNotFoundError:
        return f"{python}: no such interpreter; make a venv with: {recipe}"
    except subprocess.TimeoutExpired:
        return f"{python}: probing its packages took over {timeout_s:.0f} s"
    if proc.returncode != 0:
        return f"{python} failed to start (exit {proc.returncode}): {proc.stderr.strip()[-300:]}"
    missing = [packages[m] for m in json.loads(proc.stdout.strip().splitlines()[-1])]
    if missing:
        return (
            f"{python} lacks {', '.join(missing)}: install with `{python} -m pip install {' '.join(missing)}` "
            f"(the whole venv: {recipe})"
        )
    return None


def measure_and_print(label: str, measure, fmt, json_path: str | None) -> int:
    """Run a benchmark, print its table (and write its figures as JSON when asked); exit code 1 when a
    child process failed, with the tail of its log."""
    try:
        result = measure()
    except BenchError as e:
        print(f"{label}: {e}", file=sys.stderr)
        return 1
    print(fmt(result))
    if json_path:
        Path(json_path).write_text(json.dumps(result, indent=1))
    return 0


def median_ms(f, reps: int, warmup: int = 3) -> float:
    """Median wall time of f() over reps calls, in ms, after `warmup` calls left out."""
    for _ in range(warmup):
        f()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def matmul_gflops(size: int, dtype: str, threads: int, reps: int = 3) -> float:
    """Best-of-reps rate of a size^3 matmul in GFLOP/s (2 size^3 floating-point operations each)."""
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        a = torch.randn(size, size).to(getattr(torch, dtype))
        b = torch.randn(size, size).to(getattr(torch, dtype))
        a @ b  # first call pays for allocation and kernel selection
        best = float("inf")
        for _ in range(reps):
            t0 = time.perf_counter()
            a @ b
            best = min(best, time.perf_counter() - t0)
    finally:
        torch.set_num_threads(old)
    return 2 * size**3 / best / 1e9


def machine() -> dict:
    """The CPU kind a figure was measured on: its model name, the flags that decide its speed (AVX2, AVX-512, bf16,
    AMX), the CPUs this process may use and cpu0's hyperthread siblings."""
    from rlvr.machine import cpu_flags

    info = Path("/proc/cpuinfo").read_text()
    name = next((ln.split(":", 1)[1].strip() for ln in info.splitlines() if ln.startswith("model name")), "?")
    flags = cpu_flags(info)
    wanted = ("avx2", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8")
    siblings = ""
    sib = Path("/sys/devices/system/cpu/cpu0/topology/thread_siblings_list")
    if sib.exists():
        siblings = sib.read_text().strip()
    return {
        "cpu": name,
        "flags": [f for f in wanted if f in flags],
        "cpus_allowed": sorted(os.sched_getaffinity(0)),
        "cpu0_siblings": siblings,
    }


def child_env(threads: int) -> dict:
    """The environment of a child process: the folders holding rlvr and rlvr_bench on its path (a peer's venv has
    neither package installed), `threads` threads for OpenMP and MKL, no tokenizer threads, no progress bars."""
    import rlvr

    roots = [str(Path(rlvr.__file__).resolve().parent.parent), str(Path(__file__).resolve().parent.parent)]
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([*roots, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        "OMP_NUM_THREADS": str(threads),
        "MKL_NUM_THREADS": str(threads),
        "TOKENIZERS_PARALLELISM": "false",
        "TQDM_DISABLE": "1",
    }


class Worker:
    """One child process speaking the rlvr_bench.workers protocol; its stderr goes to a temporary log."""

    def __init__(self, name: str, python: str, spec: dict, verbose: bool, label: str = ""):
        self.name = label or name
        self.log = None if verbose else tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(
            [python, "-m", "rlvr_bench.workers", json.dumps({**spec, "framework": name})],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log or None,
            text=True,
            env=child_env(spec["threads"]),
        )

    def read(self, event: str) -> dict:
        """The next protocol line, which must be `event`; other stdout lines are library chatter."""
        for line in self.proc.stdout:
            if line.startswith(PREFIX):
                msg = json.loads(line[len(PREFIX) :])
                if msg["event"] != event:
                    raise self.error(f"expected {event!r}, got {msg['event']!r}")
                return msg
        raise self.error(f"exited (code {self.proc.wait()}) before {event!r}")

    def step(self) -> dict:
        return self.command("step", "step")

    def command(self, line: str, event: str) -> dict:
        """Send one command line and read its answer, the protocol line `event`."""
        try:
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            raise self.error(f"exited before a {line!r}") from None
        return self.read(event)

    def close(self) -> dict:
        self.proc.stdin.close()
        done = self.read("done")
        self.proc.wait(timeout=120)
        return done

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def error(self, what: str) -> BenchError:
        tail = ""
        if self.log is not None:
            self.log.seek(0)
            tail = "\n" + "".join(self.log.readlines()[-25:])
        return BenchError(f"{self.name} worker {what}{tail}")
