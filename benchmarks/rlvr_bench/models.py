"""`rlvr bench --model NAME[,NAME...]`: each published model shape's rollouts and training step on rlvr's fast
sampler, on `hf` forced, and in TRL's GRPOTrainer, beside the embedded model's, in one run on this machine.

The shapes are rlvr_bench.shapes' (random weights of each published config: speed only); the reference is the
embedded default's shape, measured the same way in the same run. For each model, each side runs `--warmup` +
`--steps` training steps of the bench shape (rlvr_bench.workers; P x G, max new tokens, LoRA, the update in bf16 where
this CPU computes it) in its own child process, the sides one after another (a whole model's memory each, never two
at once): rlvr with `rollout.backend=fast`, rlvr with `rollout.backend=hf`, and TRL (with `--frameworks rlvr,trl` and
`--trl-python`). Both frameworks load the weights in the compute dtype (bf16 where this CPU computes bf16, else
float32): a 3B model in float32 is 12 GB.

A random model never stops early and never answers, so every row decodes to max_new_tokens (the same live rows for
every model, which is why the reference has random weights too), and rlvr's reward is the parity control
(gpu_cuda_check:ParityControl, as benchmarks/step_profile.py's `--random`): about half of each group is paid, so the
update trains every group as a real model's does when its groups carry a gradient. TRL runs its update on every row
whatever the rewards, so it keeps the real reward.

Printed per model and side: generation tokens/s (completion tokens / sampling seconds), step time (mean wall of the
measured steps) and its generate and train parts, the decode's share of its memory roofline (rlvr_bench.roofline: each
decode step at the larger of the read floor and the compute floor at the rows alive, over the sampling seconds; the
read rate measured once, on the reference's weights, and applied to each model's weight bytes), peak RSS; then for
each model its fast share over the reference's fast share, against the goal of 2/3 (GOAL). Where the fast sampler
fell back to hf (a family without its fast path yet), its side says so, with the warning's reason, and no fast share
or ratio is given.

A side whose estimated peak memory (estimate_bytes) is more than this machine has available when it would start is
refused, in one line, and one that outgrows it is stopped when the available memory falls below GUARD_BYTES
(MemoryGuard): a process past the free memory would be killed, or get another killed. A side that fails is recorded
with its error line. Either way the rest of the run goes on; a failure makes the exit code 1 after the report.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from rlvr_bench.shapes import REFERENCE, SHAPES, Shape, ShapeError, available_bytes, folder, shape_config, sizes

GOAL = 2 / 3  # a family's share of the roofline, over the reference's, that issue 67 asks for
RLVR_SIDES = ("fast", "hf")  # rollout.backend of rlvr's side
PARITY = "reward.control=gpu_cuda_check:ParityControl"
BASE_BYTES = 1.2e9  # a child's own: Python, torch, transformers, the task, the verifier's pool
PROMPT_TOKENS = 100  # the chat prompt's tokens, about (for the logits' memory)
MICRO_ROWS = 16  # rows of an update's micro-batch (rlvr's train.micro_batch_size, TRL's per-device batch here)
GUARD_BYTES = 1.0e9  # a child is stopped when the machine's available memory falls below this


def estimate_bytes(side: str, s: dict, rows: int, max_new_tokens: int) -> float:
    """A side's peak memory, roughly, from the model's sizes (shapes.sizes, at the compute dtype): BASE_BYTES, the
    policy's weights, a micro-batch's float32 logits in the update (TRL at least three), and the sampler's own: the fast
    one's copy (the weights, a float32 embedding), the hf one's (its copy of the weights, its sync's merged float32
    state dict, and the logits of every generated token it keeps for the log-probs, about 8 bytes a vocabulary entry).
    Fitted to the embedded shape's peaks at 4 x 8 x 128 (fast 2.6 GB, hf 4.2 GB); a lower bound for TRL, whose
    growth the guard watches (MemoryGuard)."""
    B, V = s["weight_bytes"], s["vocab"]
    update = MICRO_ROWS * (PROMPT_TOKENS + max_new_tokens) * V * 4
    extra = {
        "fast": B + 4 * s["embed"] + update,
        "hf": 3 * B + 8 * rows * max_new_tokens * V + update,
        "trl": 3 * update,
    }[side]
    return BASE_BYTES + B + extra


def refusal(name: str, side: str, need: float, free: int) -> str | None:
    """One line when a side would not fit in the memory free now, else None."""
    if need <= free:
        return None
    return f"{name} {side}: needs about {need / 1e9:.1f} GB, {free / 1e9:.1f} GB available: not run"


class MemoryGuard:
    """While a child runs, polls the machine's available memory twice a second and kills the child when it falls
    below `floor`: a side that outgrows the estimate stops here, in one line, before the kernel's OOM killer picks a
    process (maybe someone else's). `tripped` then holds what was available and the child's peak RSS."""

    def __init__(self, proc, floor: float | None = None):
        import threading

        self.proc, self.floor, self.tripped = proc, GUARD_BYTES if floor is None else floor, None
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.done.set()
        self.thread.join()

    def _watch(self) -> None:
        while not self.done.wait(0.5):
            free = available_bytes()
            if free < self.floor and self.proc.poll() is None:
                self.tripped = (free, peak_rss_of(self.proc.pid))
                self.proc.kill()
                return


def peak_rss_of(pid: int) -> int:
    """A running process's peak resident memory (VmHWM), in bytes; 0 when it cannot be read."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    return next((int(line.split()[1]) * 1024 for line in status.splitlines() if line.startswith("VmHWM:")), 0)


def side_spec(args, path: Path, side: str, dtype: str) -> dict:
    """A worker's spec (rlvr_bench.workers) for one side of one model."""
    return {
        "model": str(path),
        "prompts": args.prompts,
        "group": args.group,
        "max_new_tokens": args.max_new_tokens,
        "lora": not args.full,
        "bf16": dtype == "bfloat16",
        "sampler": side if side in RLVR_SIDES else "fast",
        "seed": args.seed,
        "threads": args.threads,
        "steps": args.warmup + args.steps,
        "trl_gradient_checkpointing": args.trl_gradient_checkpointing,
        "sets": [f"model.dtype={dtype}", PARITY, "log.eval_every=0"],
    }


def run_side(name: str, path: Path, side: str, s: dict, args, dtype: str, samples_as: str = "") -> dict:
    """One side of one model, start to close: its ready line, step records and peak RSS; or why it was not run (the
    estimate over the available memory), was stopped (the guard) or failed. `samples_as`: the sampler its memory is
    estimated as ("hf" for a fast side the fast sampler will not run)."""
    from rlvr_bench.parent import BenchError, Worker

    need = estimate_bytes(samples_as or side, s, args.prompts * args.group, args.max_new_tokens)
    why = refusal(name, side, need, available_bytes())
    if why:
        print(why, file=sys.stderr, flush=True)
        return {"refused": why, "estimate": need}
    framework = "trl" if side == "trl" else "rlvr"
    python = args.trl_python if side == "trl" else sys.executable
    worker = Worker(framework, python, side_spec(args, path, side, dtype), args.verbose, label=f"{name} {side}")
    try:
        with MemoryGuard(worker.proc) as guard:
            try:
                return {**_steps(worker, name, side, args), "estimate": need}
            except BenchError as e:
                if guard.tripped is None:  # the side itself failed: recorded, the run goes on (exit 1 at its end)
                    print(f"{name} {side} failed: {e}", file=sys.stderr, flush=True)
                    return {"failed": f"{name} {side}: {failure_line(str(e))}", "estimate": need}
        free, peak = guard.tripped
        why = (
            f"{name} {side}: stopped at {peak / 1e9:.1f} GB, the machine down to {free / 1e9:.1f} GB available "
            f"(estimated {need / 1e9:.1f} GB): does not fit"
        )
        print(why, file=sys.stderr, flush=True)
        return {"refused": why, "estimate": need}
    finally:
        worker.kill()


def failure_line(log: str) -> str:
    """A failed worker's one line: its last exception line (`SomeError: why`), else the error's first line."""
    lines = log.strip().splitlines()
    errors = [ln.strip() for ln in lines if re.match(r"^\s*[\w.]+(Error|Exception)\b", ln)]
    return (errors or lines or ["failed"])[-1 if errors else 0]


def _steps(worker, name: str, side: str, args) -> dict:
    ready = worker.read("ready")
    steps = []
    for _ in range(args.warmup + args.steps):
        steps.append(worker.step())
        r = steps[-1]
        print(
            f"{name} {side} step {r['step']}: {r['wall']:.1f} s (generate {r['generate']:.1f}, train {r['train']:.1f})",
            file=sys.stderr,
            flush=True,
        )
    return {"ready": ready, "steps": steps, "peak_rss": worker.close()["rss"]}


def side_summary(run: dict, side: str, warmup: int, roof: dict) -> dict:
    """A side's figures over its measured steps (totals over totals); `fallback` is the fast sampler's warning where
    it sampled with hf, and then the side has no share of the roofline of its own to compare."""
    from rlvr_bench.roofline import batch_roofline_s

    if "refused" in run or "failed" in run:
        return {k: run[k] for k in ("refused", "failed") if k in run}
    rows = run["steps"][warmup:]
    gen_s = sum(r["generate"] for r in rows)
    roof_s = sum(
        batch_roofline_s(r["lengths"], r["prompt_tokens"], roof["params"], roof["read_s"], roof["gflops"]) for r in rows
    )
    fallback = run["ready"].get("fallback", "") if side == "fast" else ""
    n = max(len(rows), 1)
    return {
        "gen_tok_s": sum(r["gen_tokens"] for r in rows) / gen_s if gen_s > 0 else 0.0,
        "wall": sum(r["wall"] for r in rows) / n,
        "generate": gen_s / n,
        "train": sum(r["train"] for r in rows) / n,
        "roofline_frac": roof_s / gen_s if gen_s > 0 else 0.0,
        "peak_rss": run["peak_rss"],
        "estimate": run["estimate"],
        "sampler": run["ready"].get("sampler", side),
        "fallback": fallback,
    }


def share_ratio(model: dict, reference: dict) -> float | None:
    """The model's fast share of its roofline over the reference's (issue 67's measure, goal GOAL); None where either
    side did not run on the fast sampler."""
    a, b = model["sides"].get("fast", {}), reference["sides"].get("fast", {})
    if any(x.get("fallback") or not x.get("roofline_frac") for x in (a, b)):
        return None
    return a["roofline_frac"] / b["roofline_frac"]


def bench_models(args, names: list[str], sides: list[str], shapes: dict[str, Shape] = SHAPES) -> dict:
    """Probe the machine, then measure the reference and each named shape, side by side, one side at a time; returns
    every figure as plain data (format_models prints it)."""
    from rlvr.machine import auto_dtype
    from rlvr.policy.load import cache_dir
    from rlvr_bench.parent import machine, matmul_gflops
    from rlvr_bench.roofline import read_floor_s

    dtype = auto_dtype("auto", "float32")  # what rollout.dtype and train.autocast pick on this machine
    work = Path(args.work_dir) if args.work_dir else cache_dir() / "bench-models"
    order = [REFERENCE, *(n for n in names if n != REFERENCE)]
    configs = {n: shape_config(shapes[n]) for n in order}
    size = {n: sizes(configs[n], dtype) for n in order}
    gflops = matmul_gflops(args.probe_size, dtype, args.threads)
    ref_bytes = size[REFERENCE]["weight_bytes"]
    rate = ref_bytes / read_floor_s(ref_bytes)  # bytes a second; the read floor of a model is its bytes / rate
    models: dict[str, dict] = {}
    for n in order:
        entry = {"source": shapes[n].source, "model_type": configs[n].model_type, **size[n]}
        try:
            path = folder(n, shapes[n], work, dtype)
        except ShapeError as e:
            print(str(e), file=sys.stderr, flush=True)
            models[n] = {**entry, "error": str(e), "sides": {}}
            continue
        as_hf = "hf" if not fast_runs(configs[n]) else ""  # the fast side's memory is then hf's
        runs = {side: run_side(n, path, side, size[n], args, dtype, as_hf if side == "fast" else "") for side in sides}
        roof = {"params": size[n]["params"], "read_s": size[n]["weight_bytes"] / rate, "gflops": gflops}
        summaries = {side: side_summary(runs[side], side, args.warmup, roof) for side in sides}
        models[n] = {**entry, "folder": str(path), "read_s": roof["read_s"], "runs": runs, "sides": summaries}
    for n, m in models.items():
        m["ratio"] = share_ratio(m, models[REFERENCE]) if n != REFERENCE else None
    return {
        "machine": machine(),
        "dtype": dtype,
        "gflops": gflops,
        "read_rate": rate,
        "spec": {k: v for k, v in side_spec(args, Path(), "fast", dtype).items() if k not in ("model", "sampler")},
        "warmup": args.warmup,
        "sides": sides,
        "command": " ".join(sys.argv),
        "models": models,
    }


def fast_runs(config) -> bool:
    """Whether the fast sampler's config check passes (rlvr.sampling.families.check_supported, the check it makes
    itself); a fallback found only in the weights shows when the side runs."""
    from rlvr.sampling.families import Unsupported, check_supported

    try:
        check_supported(config)
    except Unsupported:
        return False
    return True


def _num(side: dict, key: str, fmt: str, fallback_text: str = "") -> str:
    if not side:
        return ""
    if "refused" in side or "failed" in side:
        return "refused" if "refused" in side else "failed"
    if side.get("fallback") and fallback_text:
        return fallback_text
    return format(side[key], fmt)


def _ratio(m: dict, reference: dict) -> str:
    if m is reference:
        return "reference"
    fast = m["sides"].get("fast", {})
    if fast.get("fallback"):
        return "none: no fast path (hf fallback)"
    if m["ratio"] is None:
        return ""
    return f"{m['ratio']:.2f} ({'met' if m['ratio'] >= GOAL else 'not met'})"


def summary_table(result: dict) -> str:
    """One row a model: tokens/s and step time on each side, the fast decode's share of its roofline, and that share
    over the reference's against GOAL."""
    models, sides = result["models"], result["sides"]
    ref = models[REFERENCE]
    head = ["model", "published config", "params", *(f"{s} tok/s" for s in sides), *(f"{s} step s" for s in sides)]
    head += [*(f"{s} % of roofline" for s in RLVR_SIDES if s in sides), f"fast share / reference's (goal {GOAL:.2f})"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for n, m in models.items():
        if "error" in m:
            lines.append(f"| {n} | {m['source']} | {m['params'] / 1e6:.0f}M | {m['error']} |" + " |" * (len(head) - 4))
            continue
        s = m["sides"]
        cells = [n, m["source"], f"{m['params'] / 1e6:.0f}M"]
        cells += [_num(s[x], "gen_tok_s", ".0f", "hf fallback") for x in sides]
        cells += [_num(s[x], "wall", ".2f", "hf fallback") for x in sides]
        cells += [_num(s[x], "roofline_frac", ".1%", "hf fallback") for x in RLVR_SIDES if x in sides]
        lines.append("| " + " | ".join(cells + [_ratio(m, ref)]) + " |")
    return "\n".join(lines)


def sides_table(result: dict) -> str:
    """One row a side: what ran (the sampler class), its rates, times, share of the roofline and memory."""
    head = ["model", "side", "ran on", "gen tok/s", "step s", "generate s", "train s", "% of roofline"]
    head += ["peak RSS GB", "estimated GB"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for n, m in result["models"].items():
        for side, x in m["sides"].items():
            if "refused" in x or "failed" in x:
                lines.append(f"| {n} | {side} | {x.get('refused') or x['failed']} |" + " |" * (len(head) - 3))
                continue
            cells = [n, side, x["sampler"] + (" (fallback)" if x["fallback"] else "")]
            cells += [f"{x['gen_tok_s']:.0f}", f"{x['wall']:.2f}", f"{x['generate']:.2f}", f"{x['train']:.2f}"]
            cells += [f"{x['roofline_frac']:.1%}", f"{x['peak_rss'] / 1e9:.2f}", f"{x['estimate'] / 1e9:.1f}"]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def format_models(result: dict) -> str:
    """The header (machine, dtype, shape, probes), the summary, the sides, and the fallbacks' reasons, as markdown."""
    mc, sp = result["machine"], result["spec"]
    head = [
        "random weights of the published config: speed only (every row decodes to max_new_tokens; rlvr's reward is "
        "the parity control)",
        f"CPU: {mc['cpu']} ({', '.join(mc['flags'])}); {sp['threads']} threads; weights, sampling and the update in "
        f"{result['dtype']}",
        f"shape: {sp['prompts']} prompts x {sp['group']} completions, max {sp['max_new_tokens']} new tokens, "
        f"{'LoRA r=16' if sp['lora'] else 'full fine-tune'}, seed {sp['seed']}; {result['warmup']} warm-up + "
        f"{sp['steps'] - result['warmup']} measured steps a side, the sides one after another",
        f"{result['dtype']} matmul probe {result['gflops']:.0f} GFLOP/s; read rate {result['read_rate'] / 1e9:.1f} GB/s "
        f"(on the reference's weights)",
        f"command: {result['command']}",
        "versions: " + versions_line(result),
    ]
    notes = [
        f"- {n}: {x['fallback']}" for n, m in result["models"].items() for x in m["sides"].values() if x.get("fallback")
    ]
    out = "\n".join(head) + "\n\n" + summary_table(result) + "\n\n" + sides_table(result)
    return out + ("\n\nfast sampler fallbacks:\n" + "\n".join(notes) if notes else "")


def versions_line(result: dict) -> str:
    """The packages each framework's side ran with (the first side of each that started)."""
    seen: dict[str, dict] = {}
    for m in result["models"].values():
        for side, run in m.get("runs", {}).items():
            seen.setdefault("trl" if side == "trl" else "rlvr", run.get("ready", {}).get("versions", {}))
    return "; ".join(f"{k}: " + ", ".join(f"{n} {v}" for n, v in vs.items()) for k, vs in seen.items() if vs)


def run_models(args, frameworks: list[str], names: list[str]) -> int:
    """The --model branch of `rlvr bench`: every figure printed (and written with --json), then exit 1 when a side
    failed (its line in the table says how), else 0; a side refused for memory is a result, not a failure."""
    from rlvr_bench.parent import measure_and_print

    sides = [*(RLVR_SIDES if "rlvr" in frameworks else ()), *(("trl",) if "trl" in frameworks else ())]
    result: dict = {}

    def measure() -> dict:
        result.update(bench_models(args, names, sides))
        return result

    code = measure_and_print(f"rlvr bench --model {args.model}", measure, format_models, args.json)
    failed = [x["failed"] for m in result.get("models", {}).values() for x in m["sides"].values() if "failed" in x]
    return 1 if code or failed else 0


__all__ = ["GOAL", "estimate_bytes", "refusal", "side_summary", "share_ratio", "bench_models", "format_models"]
