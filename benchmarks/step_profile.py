"""Where the default step's time goes on this CPU, one script for every machine kind (issue 49): the kinds' tables
come from the same code.

    PYTHONPATH=src:benchmarks python benchmarks/step_profile.py OUT [--model NAME | --random CONFIG_FOLDER]
        [--cpus 0,1] [--steps 3] [--variants base,cache1024,noamx] [--no-decode]

Parts, each in a child process pinned to `--cpus` (default: the first two this process may use) with one torch
thread per CPU, run one after another so nothing else competes:
- **probe**: bf16 and float32 2048^3 matmuls (the `rlvr bench` ceiling), then the update's matmul shapes (a
  512-token micro-batch through the default model's linears: forward x W^T, backward dY W and the LoRA B's dY^T h),
  and the decode shapes (8 and 32 rows), each in GFLOP/s: how far below the probe the step's own shapes run;
- **step** per variant: the bench shape (4 prompts x 8 completions, 128 new tokens, LoRA, the fast sampler, bf16
  where the CPU has it) through `rlvr.training.step.run_step`, a warm-up step then `--steps` measured: each
  phase's seconds, tokens/s, the update's share of the bf16 probe (4 N FLOP a token it ran), and from oneDNN's own
  log (`ONEDNN_VERBOSE=profile_create`) how many primitives each step built, the milliseconds spent building
  them, and which kernels (an AMX kernel's name says `amx`). Variants change the environment only:
  `base` (as rlvr runs), `cache1024` (oneDNN's primitive cache at its default 1,024 instead of rlvr's 64), `noamx`
  (`ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16`: oneDNN without AMX); `mbt0` and `mbt1024` change one setting instead
  (train.micro_batch_tokens 0 = no cap, or 1,024, against the default's 512);
- **ops**: one more step of `base` under torch's profiler: the top operators by their own CPU time, and the step's
  `aten::mm` calls by class (the frozen base's linears, the head, the LoRA products: a dimension equal to the rank),
  each class's nominal FLOPs (2 M K N a call) over its own time;
- **decode**: benchmarks/bench_decode_floor.py on the same model (the floors and the share of the roofline).

A model whose weights cannot travel (a lent machine's host) is measured with `--random CONFIG_FOLDER`: random
weights of that config's shape (the default's config.json and tokenizer, benchmarks/gpu_cuda_check.py --prepare).
A random model writes every completion to max_new_tokens and never answers, so its reward is the parity control
(gpu_cuda_check:ParityControl): about half of each group is rewarded and the update trains every group, as a
step of the real model does when its groups carry a gradient. Times per token compare across models; a step's
seconds do not (the real model stops early).

Writes OUT/summary.md (the tables), OUT/ops.txt, OUT/decode.txt, OUT/children.jsonl and each child's log; prints the
summary. `--report` prints the tables again from OUT/children.jsonl alone (what comes back from a lent machine).
Findings: docs/performance.md, "The AMX kind, step by phase".
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
MARK = "STEP_PROFILE "
# a variant: (environment, config settings) on top of the bench shape
VARIANTS: dict[str, tuple[dict, list[str]]] = {
    "base": ({}, []),
    "cache1024": ({"ONEDNN_PRIMITIVE_CACHE_CAPACITY": "1024"}, []),
    "noamx": ({"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16"}, []),
    "mbt0": ({}, ["train.micro_batch_tokens=0"]),  # micro-batches of 16 rows, however long
    "mbt1024": ({}, ["train.micro_batch_tokens=1024"]),
}


# ---------------------------------------------------------------------------------------------- the parent side


def child(
    out: Path,
    part: str,
    cpus: list[int],
    args,
    env_extra: dict,
    label: str,
    sets: tuple[str, ...] | list[str] = (),
    timeout: int = 900,
) -> list[dict]:
    """Run one part in a child pinned to `cpus`; returns its MARK lines (JSON) and appends them to children.jsonl.
    The child's stdout (oneDNN's log too) is kept in OUT/LABEL.log."""
    env = child_env(env_extra)
    spec = {
        "part": part,
        "cpus": cpus,
        "model": args.model,
        "random": args.random,
        "steps": args.steps,
        "label": label,
        "sets": list(sets),
    }
    log = out / f"{label}.log"
    t0 = time.perf_counter()
    with open(log, "w") as f:
        proc = subprocess.run(
            [sys.executable, __file__, "--child", json.dumps(spec)],
            stdout=f,
            stderr=subprocess.STDOUT,
            env=env,
            timeout=timeout,
        )
    lines = [ln for ln in log.read_text(errors="replace").splitlines()]
    rows = [json.loads(ln[len(MARK) :]) for ln in lines if ln.startswith(MARK)]
    if proc.returncode != 0:
        tail = "\n".join(lines[-25:])
        print(f"[{label}] exit {proc.returncode} after {time.perf_counter() - t0:.0f} s:\n{tail}", flush=True)
    rows = _with_onednn_builds(rows, lines)
    with open(out / "children.jsonl", "a") as f:
        for r in rows:
            f.write(json.dumps({"label": label, **r}) + "\n")
    print(f"[{label}] {len(rows)} records in {time.perf_counter() - t0:.0f} s", flush=True)
    return rows


def child_env(extra: dict) -> dict:
    """This process's environment with `extra`, rlvr's src/ and benchmarks/ on the path, output unbuffered."""
    env = {**os.environ, **extra, "PYTHONUNBUFFERED": "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(HERE.parent / "src"), str(HERE), env.get("PYTHONPATH", "")])
    return env


def _with_onednn_builds(rows: list[dict], lines: list[str]) -> list[dict]:
    """Attach to each step record the oneDNN primitives built since the previous record: count, ms, kernels."""
    builds: list[tuple[int, float, str]] = []  # (record index it precedes, ms, kernel)
    k = 0
    for ln in lines:
        if ln.startswith(MARK):
            k += 1
        elif ln.startswith("onednn_verbose") and ",create:cache_miss," in ln:
            fields = ln.split(",")
            try:
                ms = float(fields[-1])
            except ValueError:
                continue
            builds.append((k, ms, fields[6]))  # v1 lines: ...,create:cache_miss,cpu,PRIMITIVE,IMPLEMENTATION,...
    for i, r in enumerate(rows):
        mine = [(ms, kern) for j, ms, kern in builds if j == i]
        if mine:
            r["onednn_builds"] = len(mine)
            r["onednn_build_ms"] = round(sum(ms for ms, _ in mine), 1)
            r["onednn_kernels"] = dict(Counter(kern for _, kern in mine).most_common(6))
    return rows


def pick_cpus(asked: str) -> list[int]:
    allowed = sorted(os.sched_getaffinity(0))
    if asked:
        return [int(c) for c in asked.split(",")]
    return allowed[:2]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", nargs="?", default="")
    p.add_argument("--model", default="smollm2-135m-instruct")
    p.add_argument("--random", default="", help="a folder with a config.json and tokenizer: random weights of it")
    p.add_argument("--cpus", default="", help="comma-separated CPU ids (default: the first two allowed)")
    p.add_argument("--steps", type=int, default=3, help="measured steps per variant, after one warm-up step")
    p.add_argument("--variants", default="base,cache1024,noamx")
    p.add_argument("--no-probe", action="store_true", help="skip the matmul rates")
    p.add_argument("--no-ops", action="store_true", help="skip the profiled step")
    p.add_argument("--no-decode", action="store_true", help="skip bench_decode_floor.py")
    p.add_argument("--report", action="store_true", help="only print the tables again from OUT/children.jsonl")
    p.add_argument("--child", default="", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        return run_child(json.loads(args.child))
    if not args.out:
        p.error("the output folder OUT is required")
    sys.path[:0] = [str(HERE.parent / "src"), str(HERE)]  # rlvr and rlvr_bench here too, as in the children
    if args.report:
        return report(Path(args.out))

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "children.jsonl").write_text("")
    from rlvr_bench.parent import machine

    info = machine()
    cpus = pick_cpus(args.cpus)
    print(json.dumps({"machine": info, "cpus": cpus}), flush=True)
    if args.random:  # beside OUT, not in it: 540 MB of weights
        args.model = str(random_model(Path(args.random), Path(tempfile.gettempdir()) / "rlvr-step-profile-model"))
    prebuild_native()  # once, on every core: the children find it in the cache

    sections = [f"# Step profile\n\nmachine: {info['cpu']}; flags {' '.join(info['flags'])}; pinned to CPUs {cpus}"]
    sections.append(f"model: {args.model}{' (random weights of the default shape)' if args.random else ''}")
    probes = [] if args.no_probe else child(out, "probe", cpus, args, {}, "probe")
    amx = "amx_tile" in info["flags"] and not args.no_probe
    noamx = child(out, "probe", cpus, args, VARIANTS["noamx"][0], "probe-noamx") if amx else []
    sections.append(probe_table(probes, noamx))
    twin = [int(c) for c in info["cpu0_siblings"].replace("-", ",").split(",") if c.strip().isdigit()]
    if (
        len(twin) == 2 and sorted(twin) != sorted(cpus) and not args.no_probe
    ):  # a core's two hardware threads, as a 2-vCPU machine may be
        ht = child(out, "probe", twin, args, {}, "probe-ht")
        rate = next((r["gflops"] for r in ht if r.get("what") == "probe" and r["dtype"] == "bfloat16"), 0.0)
        sections.append(f"bf16 probe on one core's two threads (CPUs {twin}): {rate:.0f} GFLOP/s")

    steps: dict[str, list[dict]] = {}
    for name in [v for v in args.variants.split(",") if v]:
        if name == "noamx" and "amx_tile" not in info["flags"]:
            continue
        env, sets = VARIANTS[name]
        steps[name] = child(out, "step", cpus, args, {**env, "ONEDNN_VERBOSE": "profile_create"}, f"step-{name}", sets)
    sections.append(step_table(steps, probes))
    if not args.no_ops:
        rows = child(out, "ops", cpus, args, {}, "ops")
        table = next((r["table"] for r in rows if "table" in r), "(no profile)")
        (out / "ops.txt").write_text(table)
        sections.append("## Top operators of one base step (self CPU time)\n\n```\n" + table + "\n```")
        sections.append(matmul_class_table(rows, probes))
    if not args.no_decode:
        sections.append(decode(out, cpus, args))
    text = "\n\n".join(sections) + "\n"
    (out / "summary.md").write_text(text)
    print(text, flush=True)
    return 0


def report(out: Path) -> int:
    """The tables again from OUT/children.jsonl (what a lent machine sends back), without measuring."""
    records: dict[str, list[dict]] = {}
    for line in (out / "children.jsonl").read_text().splitlines():
        r = json.loads(line)
        records.setdefault(r.pop("label"), []).append(r)
    probes = records.get("probe", [])
    steps = {k.removeprefix("step-"): v for k, v in records.items() if k.startswith("step-")}
    tables = [probe_table(probes, records.get("probe-noamx", [])), step_table(steps, probes)]
    if "ops" in records:
        tables.append(matmul_class_table(records["ops"], probes))
    print("\n\n".join(tables))
    return 0


def random_model(config_dir: Path, folder: Path) -> Path:
    """Random float32 weights of config_dir's shape, saved once with its tokenizer (seed 0)."""
    if (folder / "config.json").exists():
        return folder
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(config_dir), dtype=torch.float32).save_pretrained(
        folder
    )
    AutoTokenizer.from_pretrained(config_dir).save_pretrained(folder)
    return folder


def prebuild_native() -> None:
    t0 = time.perf_counter()
    try:
        from rlvr.sampling.native import decode_ops

        ok = decode_ops() is not None
    except Exception as e:  # the sampler falls back to torch's ops; say so
        ok = False
        print(f"native kernels: {e}", flush=True)
    print(f"native kernels {'ready' if ok else 'unavailable'} ({time.perf_counter() - t0:.0f} s)", flush=True)


def probe_table(rows: list[dict], noamx: list[dict]) -> str:
    other = {(r["shape"], r["what"], r["dtype"]): r["gflops"] for r in noamx if "shape" in r}
    lines = ["## Matmul rates, GFLOP/s (best of 5)", ""]
    lines.append("| shape (M x K x N) | what | dtype | GFLOP/s | without AMX |")
    lines.append("|---|---|---|---|---|")
    for r in rows:
        if "shape" in r:
            lines.append(
                f"| {r['shape']} | {r['what']} | {r['dtype']} | {r['gflops']:.0f} | "
                f"{other.get((r['shape'], r['what'], r['dtype']), float('nan')):.0f} |"
            )
    return "\n".join(lines)


def update_ceiling(rows: list[dict], probes: list[dict]) -> tuple[str, float]:
    """The update's dtype (from a child's "ready" record: bf16 under bf16 autocast, else float32) and the probe's
    GFLOP/s in it (0 where it was not probed)."""
    ready = next((r for r in rows if r.get("kind") == "ready"), {})
    dtype = "bfloat16" if ready.get("autocast") == "bfloat16" else "float32"
    return dtype, next((r["gflops"] for r in probes if r.get("what") == "probe" and r["dtype"] == dtype), 0.0)


def step_table(steps: dict[str, list[dict]], probes: list[dict]) -> str:
    lines = ["## The step, bench shape (4 x 8, 128 new tokens), mean of the measured steps", ""]
    lines.append(
        "| variant | step s | generate s | train s | verify s | other s | gen tok/s | train tok/s | update fwd tok/s | update % of "
        "probe in its dtype | oneDNN builds / step | build ms / step | kernels built |"
    )
    lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, rows in steps.items():
        measured = [r for r in rows if r.get("kind") == "step" and not r.get("warmup")]
        if not measured:
            lines.append(f"| {name} | failed ||||||||||||")
            continue
        m = functools.partial(_mean, measured)
        params = measured[0]["params"]
        _, ceiling = update_ceiling(rows, probes)
        upd = 100 * 4 * params * m("fwd_tokens") / max(m("train"), 1e-9) / (ceiling * 1e9) if ceiling else 0.0
        kernels: Counter = Counter()
        for r in measured:
            kernels.update(r.get("onednn_kernels", {}))
        lines.append(
            f"| {name} | {m('wall'):.2f} | {m('generate'):.2f} | {m('train'):.2f} | {m('verify'):.2f} | "
            f"{m('other'):.2f} | {m('gen_tokens') / max(m('generate'), 1e-9):.0f} | "
            f"{m('gen_tokens') / max(m('train'), 1e-9):.0f} | {m('fwd_tokens') / max(m('train'), 1e-9):.0f} | {upd:.1f} | {m('onednn_builds'):.0f} | "
            f"{m('onednn_build_ms'):.0f} | {', '.join(f'{k} {v}' for k, v in kernels.most_common(3))} |"
        )
    lines.append("")
    lines.append("warm-up steps (first step of each variant):")
    for name, rows in steps.items():
        for r in rows:
            if r.get("warmup"):
                lines.append(
                    f"- {name}: {r['wall']:.2f} s (generate {r['generate']:.2f}, train {r['train']:.2f}), "
                    f"{r.get('onednn_builds', 0)} oneDNN builds, {r.get('onednn_build_ms', 0):.0f} ms"
                )
    return "\n".join(lines)


def matmul_classes(events, rank: int, vocab: int) -> list[dict]:
    """`aten::mm` events (name, input shapes, count, self CPU microseconds) summed by class: "lora" where a
    dimension is the LoRA rank, "head" where one is the vocabulary, else "base". FLOPs are 2 M K N a call."""
    out: dict[str, dict] = {}
    for name, shapes, count, self_us in events:
        if name != "aten::mm" or len(shapes) < 2 or len(shapes[0]) != 2 or len(shapes[1]) != 2:
            continue
        (m, k), (_, n) = shapes[0], shapes[1]
        cls = "lora" if rank in (m, k, n) else "head" if vocab in (m, k, n) else "base"
        c = out.setdefault(cls, {"class": cls, "flop": 0.0, "seconds": 0.0, "calls": 0})
        c["flop"] += 2.0 * m * k * n * count
        c["seconds"] += self_us / 1e6
        c["calls"] += count
    return [out[c] for c in ("base", "head", "lora") if c in out]


def matmul_class_table(ops_rows: list[dict], probes: list[dict]) -> str:
    """The profiled step's matmuls by class (the ops child's records), each class's rate against the probe in the
    update's dtype."""
    dtype, ceiling = update_ceiling(ops_rows, probes)
    lines = [
        "## The profiled step's aten::mm by class (the update's; the fast sampler's matmuls are not aten::mm)",
        "",
        f"| class | TFLOP | self s | calls | GFLOP/s | % of the {dtype} probe |",
        "|---|---|---|---|---|---|",
    ]
    for c in next((r["classes"] for r in ops_rows if "classes" in r), []):
        rate = c["flop"] / max(c["seconds"], 1e-9) / 1e9
        share = f"{100 * rate / ceiling:.0f}%" if ceiling else "-"
        lines.append(
            f"| {c['class']} | {c['flop'] / 1e12:.3f} | {c['seconds']:.2f} | {c['calls']} | {rate:.0f} | {share} |"
        )
    return "\n".join(lines)


def _mean(rows: list[dict], key: str) -> float:
    return sum(r.get(key, 0.0) for r in rows) / len(rows)


def decode(out: Path, cpus: list[int], args) -> str:
    env = child_env({})
    cmd = [sys.executable, str(HERE / "bench_decode_floor.py"), "--model", args.model, "--batches", "2"]
    cmd += ["--reps", "10", "--threads", str(len(cpus))]
    t0 = time.perf_counter()
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env=env, timeout=900, preexec_fn=lambda: os.sched_setaffinity(0, cpus)
    )
    text = proc.stdout + (f"\n(exit {proc.returncode})\n{proc.stderr[-2000:]}" if proc.returncode else "")
    (out / "decode.txt").write_text(text)
    print(f"[decode] {time.perf_counter() - t0:.0f} s", flush=True)
    return "## Decode against its floors (benchmarks/bench_decode_floor.py)\n\n```\n" + text.strip() + "\n```"


# ---------------------------------------------------------------------------------------------- the child side
def emit(**fields) -> None:
    """One record on stdout, after flushing C's stdio so oneDNN's log lines stay before the record they belong to."""
    ctypes.CDLL(None).fflush(None)
    sys.stdout.write(MARK + json.dumps(fields) + "\n")
    sys.stdout.flush()


def run_child(spec: dict) -> int:
    os.sched_setaffinity(0, spec["cpus"])
    import torch

    torch.set_num_threads(len(spec["cpus"]))
    if spec["part"] == "probe":
        probe_part()
    elif spec["part"] in ("step", "ops"):
        step_part(spec)
    return 0


def _rate(f, operands: tuple, flop: float, reps: int = 5) -> float:
    """Best of `reps` calls of f(*operands) (after one untimed call), in GFLOP/s."""
    f(*operands)
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        f(*operands)
        best = min(best, time.perf_counter() - t0)
    return flop / best / 1e9


def probe_part() -> None:
    import torch

    from rlvr.machine import auto_dtype
    from rlvr_bench.parent import matmul_gflops

    for dtype in ("bfloat16", "float32"):  # `rlvr bench`'s ceiling probe
        gflops = matmul_gflops(2048, dtype, torch.get_num_threads(), reps=5)
        emit(shape="2048x2048x2048", what="probe", dtype=dtype, gflops=gflops)
    dtype = auto_dtype("auto", "float32")
    dt = getattr(torch, dtype)
    H, inner, vocab, r = 576, 1536, 49152, 16
    for m in (512, 32, 8):
        for k, n, name in ((H, 3 * H, "q|k|v"), (H, 2 * inner, "gate|up"), (inner, H, "down"), (H, vocab, "head")):
            if m < 512 and name == "q|k|v":
                continue
            x, w = torch.randn(m, k).to(dt), torch.randn(n, k).to(dt)
            emit(
                shape=f"{m}x{k}x{n}",
                what=f"forward {name}",
                dtype=dtype,
                gflops=_rate(torch.nn.functional.linear, (x, w), 2 * m * k * n),
            )
            if m == 512:
                g = torch.randn(m, n).to(dt)
                emit(
                    shape=f"{m}x{n}x{k}",
                    what=f"backward dY W {name}",
                    dtype=dtype,
                    gflops=_rate(torch.matmul, (g, w), 2 * m * k * n),
                )
                h = torch.randn(m, r).to(dt)
                emit(
                    shape=f"{n}x{m}x{r}",
                    what=f"LoRA B grad {name}",
                    dtype=dtype,
                    gflops=_rate(torch.matmul, (g.t(), h), 2 * m * n * r),
                )


def step_part(spec: dict) -> None:
    from rlvr.machine import auto_dtype
    from rlvr.training.step import run_step
    from rlvr_bench.workers import rlvr_state, step_figures

    sets = [
        "log.eval_every=0",
        "eval.out_of_domain=[]",  # held-out sets are not part of a step (and reasoning-gym may be absent)
    ]
    if spec["random"]:
        sets.append("reward.control=gpu_cuda_check:ParityControl")
    bench = {  # `rlvr bench`'s shape, bf16 where the CPU has it (what train.autocast auto picks)
        "seed": 0,
        "prompts": 4,
        "group": 8,
        "max_new_tokens": 128,
        "lora": True,
        "bf16": auto_dtype("auto", "float32") == "bfloat16",
        "sampler": "fast",
        "model": spec["model"],
        "sets": sets + spec["sets"],
    }
    state = rlvr_state(bench)
    cfg, beta = state.cfg, state.algo.beta
    params = sum(p.numel() for n, p in state.model.named_parameters() if "lora_" not in n)
    emit(kind="ready", params=params, autocast=cfg.train.autocast, dtype=cfg.rollout.dtype)
    n = 1 + (spec["steps"] if spec["part"] == "step" else 0)
    for step in range(n):
        t0 = time.perf_counter()
        result = run_step(state, step)
        emit(kind="step", warmup=step == 0, wall=time.perf_counter() - t0, params=params, **step_figures(result, beta))
    if spec["part"] == "ops":
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            t0 = time.perf_counter()
            result = run_step(state, n)
            wall = time.perf_counter() - t0
        emit(kind="step", profiled=True, wall=wall, params=params, **step_figures(result, beta))
        table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=30, max_name_column_width=60)
        events = [
            (e.key, e.input_shapes, e.count, e.self_cpu_time_total)
            for e in prof.key_averages(group_by_input_shape=True)
            if e.key == "aten::mm"
        ]
        vocab = state.model.get_input_embeddings().weight.shape[0]
        emit(kind="ops", table=table, classes=matmul_classes(events, cfg.model.lora.r, vocab))


if __name__ == "__main__":
    sys.exit(main())
