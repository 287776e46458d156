"""`rlvr bench`: rlvr's training step against TRL's `GRPOTrainer`, side by side on this machine.

Both frameworks train the same model on the same task prompts (rlvr's seeded stream, same chat messages),
with the same reward (rlvr's default reward terms, passed to TRL as its reward functions), seed, shape
(P prompts x G completions, max new tokens, LoRA or full) and thread count. Each runs in its own child
process (TRL's in its own venv: `--trl-python`), and the parent alternates them one step at a time, so
machine noise lands on both alike. The first `--warmup` steps of each are shown but left out of the means.

Printed per step and as means: wall time and its phases (generate, verify, train, other), generation
tokens/s (completion tokens / sampling seconds), training tokens/s (the same completion tokens / update
seconds), each phase as a fraction of the FLOP ceiling that a matmul probe measures at start, the mean
reward and each child's peak RSS; then the ratios rlvr / TRL.

FLOP counts are nominal, per token through the model: 2 N for a forward (N = base parameters), so
generation does 2 N per generated token; an update does 6 N per token (forward, backward to activations,
backward to weights) for a full fine-tune and 4 N with LoRA (the frozen base needs no weight gradients),
over the tokens the update ran through the model, padding not counted: rlvr runs each distinct prompt of its
rows once, for the whole group, then the completions, and skips rows with zero advantage, which carry no gradient;
TRL runs every row's prompt and completion. The ceiling is the probe's rate in the compute dtype
(bf16 when `--dtype bfloat16`, else float32).

`--model NAME[,NAME...]` (published shapes, rlvr_bench.shapes) measures each shape's step on the fast sampler, on hf
forced and in TRL, and its decode's share of the roofline against the embedded model's (rlvr_bench.models).
`--vs episodes` compares an episode step's policy tokens/s with a single-turn step's (rlvr_bench.episodes).
`--vs ENGINE --ENGINE-python VENV/bin/python` compares rollout batches only: rlvr's sampler against a CPU engine
(vllm, llamacpp, ct2, openvino; or `--vs engines` for all) in its own venv (rlvr_bench.rollouts).
"""

from __future__ import annotations

import argparse
import os
import sys

from rlvr_bench.child import bench_config
from rlvr_bench.engines import ENGINES
from rlvr_bench.parent import BenchError, Worker, check_peer_python, matmul_gflops, measure_and_print
from rlvr_bench.roofline import decode_roofline, read_rate, step_floors
from rlvr_bench.shapes import ALL, REFERENCE, SHAPES, parse_shapes

ENGINE_NAMES = tuple(ENGINES)

FRAMEWORKS = ("rlvr", "trl")
PHASES = ("generate", "verify", "train", "other")


# what the TRL worker imports, as import name -> pip name (torch comes with trl; rlvr itself goes on its path)
TRL_PACKAGES = {"trl": "trl", "peft": "peft", "math_verify": "math-verify", "yaml": "pyyaml"}
TRL_RECIPE = (
    "python3 -m venv trl-venv && trl-venv/bin/pip install torch==2.13.0 && "
    "trl-venv/bin/pip install trl peft math-verify pyyaml"
)


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "bench",
        help="speed of a training step: rlvr vs TRL's GRPOTrainer, side by side",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument(
        "--model",
        default="smollm2-135m-instruct",
        help="embedded model name, a transformers folder, a GGUF file or a hub id; or published shapes, comma-separated, "
        f"from {', '.join(n for n in SHAPES if n != REFERENCE)} ('{ALL}' for all): random weights of each, speed only, "
        "on the fast sampler, on hf forced and in TRL, beside the embedded model's shape (rlvr_bench.models)",
    )
    p.add_argument(
        "--config",
        default="default",
        help="the preset or training config file whose task, prompts and settings both sides take (default: the "
        "default preset); the shape options below and --set go on top. The reasoning workload: "
        "docs/examples/multi_step/multi_step.yaml with a 0.5B model (docs/performance.md)",
    )
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a config override (repeatable)")
    p.add_argument("-P", "--prompts", type=int, default=4, help="prompts per step")
    p.add_argument("-G", "--group", type=int, default=8, help="completions per prompt")
    p.add_argument("--max-new-tokens", type=int, default=128)
    p.add_argument("--full", action="store_true", help="full fine-tune instead of LoRA r=16 on all linear layers")
    p.add_argument(
        "--dtype",
        choices=("bfloat16", "float32"),
        default="bfloat16",
        help="the updates' compute: bf16 autocast (rlvr's preset; TRL's bf16=True) or float32; rlvr's "
        "sampler computes in the config's rollout.dtype (auto: bf16 where the CPU has it, else float32), TRL's "
        "generate follows this setting",
    )
    p.add_argument("--sampler", choices=("fast", "hf"), default="fast", help="rlvr's rollout backend")
    p.add_argument("--steps", type=int, default=3, help="measured steps per framework")
    p.add_argument(
        "--sequential",
        action="store_true",
        help="run the frameworks one after the other, each alone in memory, instead of alternating steps with both "
        "loaded (a workload where the two sides' memory does not fit the machine at once: the reasoning workload's)",
    )
    p.add_argument("--warmup", type=int, default=1, help="steps run first and left out of the means")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="torch threads in every process")
    p.add_argument("--frameworks", default="rlvr,trl", help="comma-separated subset of rlvr,trl")
    p.add_argument(
        "--vs",
        default="trl",
        help="trl: training steps against TRL's GRPOTrainer; episodes: an episode step's policy tokens/s beside a "
        "single-turn step's (rlvr_bench.episodes); an engine or a comma-separated list of "
        f"{', '.join(ENGINE_NAMES)} (or 'engines' for all): rollout batches only, rlvr's sampler against "
        "each engine in its own venv (rlvr_bench.rollouts; needs --ENGINE-python)",
    )
    for name in ENGINE_NAMES:
        p.add_argument(
            f"--{name}-python",
            default=os.environ.get(f"RLVR_{name.upper()}_PYTHON", ""),
            help=f"with --vs {name}: interpreter of a venv with {name} (default: $RLVR_{name.upper()}_PYTHON; "
            "recipes in docs/performance.md)",
        )
    p.add_argument(
        "--precisions",
        default="",
        help="with --vs ENGINE: only these precisions (comma-separated, e.g. bf16,float32); default every engine's all",
    )
    p.add_argument(
        "--torch-ops",
        action="store_true",
        help="with --vs ENGINE: also run rlvr's sampler on torch's ops (RLVR_NATIVE=0) as its own side",
    )
    p.add_argument(
        "--syncs", type=int, default=2, help="with --vs ENGINE: weight syncs timed per side after the batches"
    )
    p.add_argument(
        "--work-dir",
        default="",
        help="with --vs ENGINE: where engines put their converted models (default: a new temporary folder); with "
        "--model SHAPES: where the random models are built once and kept (default: ~/.cache/rlvr/bench-models)",
    )
    p.add_argument(
        "--trl-python",
        default=os.environ.get("RLVR_TRL_PYTHON", sys.executable),
        help="interpreter of a venv with trl and math-verify installed (default: $RLVR_TRL_PYTHON, else this one)",
    )
    p.add_argument(
        "--trl-gradient-checkpointing",
        action="store_true",
        help="leave TRL's default gradient checkpointing on (off by default: see docs/performance.md)",
    )
    p.add_argument(
        "--budget",
        type=float,
        default=0.0,
        help="with --vs trl: time to accuracy instead of step speed; each side trains --config (the default preset) "
        "for this many wall-clock minutes, then both are scored on the held-out problems "
        "(rlvr_bench.time_to_accuracy)",
    )
    p.add_argument("--out", default="runs/time-to-accuracy", help="with --budget: the comparison's folder")
    p.add_argument(
        "--rlvr-run",
        default="",
        help="with --budget: a finished run of the default preset to use as rlvr's side instead of training one",
    )
    p.add_argument(
        "--points",
        default="",
        help="with --budget: minutes at which checkpoints are scored "
        "(default: a third and two thirds of the budget), plus the finals",
    )
    p.add_argument("--eval-limit", type=int, default=300, help="with --budget: held-out problems, evenly over bands")
    p.add_argument("--trl-save-every", type=int, default=2, help="with --budget: TRL saves its adapter every N steps")
    p.add_argument("--probe-size", type=int, default=2048, help="matrix size of the FLOP-ceiling probe")
    p.add_argument("--json", help="also write every figure to this file")
    p.add_argument("--verbose", action="store_true", help="show the children's logs")
    return p


def run(args) -> int:
    vs = getattr(args, "vs", "trl")
    if vs == "episodes":
        from rlvr_bench.episodes import run_vs_episodes

        return run_vs_episodes(args)
    if vs != "trl":
        from rlvr_bench.rollouts import parse_engines, run_vs_engines

        engines = parse_engines(vs)
        if engines is None:
            print(
                f"rlvr bench --vs {vs}: choose trl, episodes, or engines from {', '.join(ENGINE_NAMES)} (comma-separated), "
                "or 'engines' for all",
                file=sys.stderr,
            )
            return 2
        return run_vs_engines(args, engines)
    if "trl" in args.frameworks.split(",") or getattr(args, "budget", 0):
        why = check_peer_python(args.trl_python, TRL_PACKAGES, TRL_RECIPE)
        if why:
            print(f"rlvr bench: --trl-python {why}", file=sys.stderr)
            return 1
    if getattr(args, "budget", 0):
        from rlvr_bench.time_to_accuracy import run_time_to_accuracy

        try:
            return run_time_to_accuracy(args)
        except (BenchError, RuntimeError) as e:
            print(f"rlvr bench --budget: {e}", file=sys.stderr)
            return 1
    frameworks = [f.strip() for f in args.frameworks.split(",") if f.strip()]
    bad = [f for f in frameworks if f not in FRAMEWORKS]
    if bad or not frameworks:
        print(f"--frameworks: {','.join(bad) or 'empty'}; choose from {','.join(FRAMEWORKS)}", file=sys.stderr)
        return 2
    names = parse_shapes(args.model)
    if names is not None:
        from rlvr_bench.models import run_models

        return run_models(args, frameworks, names)
    return measure_and_print("rlvr bench", lambda: bench(args, frameworks), format_report, args.json)


def bench(args, frameworks: list[str]) -> dict:
    """Probe the ceiling, start the children, alternate their steps; returns every figure as plain data."""
    from rlvr.policy.load import resolve_model_path

    spec = {
        "model": resolve_model_path(args.model),
        "prompts": args.prompts,
        "group": args.group,
        "max_new_tokens": args.max_new_tokens,
        "lora": not args.full,
        "bf16": args.dtype == "bfloat16",
        "sampler": args.sampler,
        "seed": args.seed,
        "threads": args.threads,
        "steps": args.warmup + args.steps,
        "trl_gradient_checkpointing": args.trl_gradient_checkpointing,
        "config": args.config,
        "sets": list(args.set),
    }
    # the dtypes the update and each side's decode compute in (a bf16 probe on a CPU without bf16 would take minutes)
    cfg = bench_config(spec)
    needed = sorted({args.dtype, cfg["rollout"]["dtype"], cfg["model"]["dtype"]})
    ceilings = {d: matmul_gflops(args.probe_size, d, args.threads) for d in needed}
    rate = read_rate()
    # side by side: both children alive, alternating a step each; --sequential: each alone in memory, one after the other
    groups = [[f] for f in frameworks] if getattr(args, "sequential", False) else [frameworks]
    ready, done, steps = {}, {}, {f: [] for f in frameworks}
    for group in groups:
        workers = {f: Worker(f, args.trl_python if f == "trl" else sys.executable, spec, args.verbose) for f in group}
        try:
            ready.update({f: w.read("ready") for f, w in workers.items()})
            for _ in range(spec["steps"]):
                for f, w in workers.items():  # alternate: one step of each in turn
                    steps[f].append(w.step())
                    s = steps[f][-1]
                    print(
                        f"{f} step {s['step']}: {s['wall']:.1f} s (generate {s['generate']:.1f}, train {s['train']:.1f})",
                        file=sys.stderr,
                        flush=True,
                    )
            done.update({f: w.close() for f, w in workers.items()})
        finally:
            for w in workers.values():
                w.kill()
    result = {
        "spec": spec,
        "ceilings_gflops": ceilings,
        "probe_size": args.probe_size,
        "read_gb_s": rate / 1e9,
        "warmup": args.warmup,
        "command": " ".join(sys.argv),
        "frameworks": {},
    }
    for f in frameworks:
        params = ready[f]["params"]
        rows = [{**s, **fractions(s, params, ceilings[args.dtype], spec)} for s in steps[f]]
        roof = decode_roofline(f, cfg, spec["model"], params, rate, ceilings)
        for r in rows:
            r.update(
                step_floors(r, roof, params, train_flops_per_token(params, spec["lora"]), ceilings[args.dtype], spec)
            )
        result["frameworks"][f] = {
            "decode_dtype": roof["dtype"],
            "params": params,
            "load_s": ready[f]["load_s"],
            "versions": ready[f]["versions"],
            "steps": rows,
            "peak_rss": done[f]["rss"],
            "mean": summarize(rows[args.warmup :], params, ceilings[args.dtype], spec),
        }
    fw = result["frameworks"]
    if len(fw) == 2 and fw["rlvr"]["mean"] and fw["trl"]["mean"]:
        result["ratios"] = ratios(fw["rlvr"]["mean"], fw["trl"]["mean"], fw["rlvr"]["peak_rss"], fw["trl"]["peak_rss"])
    return result


def train_flops_per_token(params: int, lora: bool) -> int:
    """Nominal update cost per token: 2N forward + 2N backward to activations (+ 2N to weights when full)."""
    return (4 if lora else 6) * params


def fractions(s: dict, params: int, ceiling_gflops: float, spec: dict) -> dict:
    """Token rates and fractions of the FLOP ceiling for one step record (or a summed one)."""
    gen_tok_s = s["gen_tokens"] / s["generate"] if s["generate"] > 0 else 0.0
    train_tok_s = s["gen_tokens"] / s["train"] if s["train"] > 0 else 0.0
    # the work the update actually did: the tokens it ran through the model (each side's own count, workers.py)
    train_flops = train_flops_per_token(params, spec["lora"]) * s["fwd_tokens"]
    ceiling = ceiling_gflops * 1e9
    return {
        "gen_tok_s": gen_tok_s,
        "train_tok_s": train_tok_s,
        "gen_ceiling_frac": 2 * params * gen_tok_s / ceiling,
        "train_ceiling_frac": train_flops / s["train"] / ceiling if s["train"] > 0 else 0.0,
    }


def summarize(rows: list[dict], params: int, ceiling_gflops: float, spec: dict) -> dict:
    """Means over the measured steps; the rates are totals over totals (tokens / seconds), not means of rates."""
    if not rows:
        return {}
    keys = ("wall", *PHASES, "gen_tokens", "prompt_tokens", "fwd_tokens", "active_rows", "reward")
    keys += ("decode_floor", "train_floor", "floor") if "floor" in rows[0] else ()  # rlvr_bench.roofline.step_floors
    total = {k: sum(r[k] for r in rows) for k in keys}
    out = {k: total[k] / len(rows) for k in keys}
    out.update(fractions(total, params, ceiling_gflops, spec))
    return out


COLUMNS = (
    "framework",
    "step",
    "wall s",
    "generate s",
    "verify s",
    "train s",
    "other s",
    "gen tok/s",
    "train tok/s",
    "gen % ceil",
    "decode % roof",
    "train % ceil",
    "step / floor",
    "rows trained",
    "reward",
    "peak RSS GB",
)


def _row(name: str, step: str, r: dict, rss: float | None) -> list[str]:
    return [
        name,
        step,
        f"{r['wall']:.2f}",
        *(f"{r[p]:.2f}" for p in PHASES),
        f"{r['gen_tok_s']:.0f}",
        f"{r['train_tok_s']:.0f}",
        f"{100 * r['gen_ceiling_frac']:.1f}",
        f"{100 * r['decode_floor'] / r['generate']:.1f}" if r.get("generate") and "decode_floor" in r else "",
        f"{100 * r['train_ceiling_frac']:.1f}",
        f"{r['wall'] / r['floor']:.2f}" if r.get("floor") else "",
        f"{round(r['active_rows'], 1):g}",
        f"{r['reward']:.3f}",
        "" if rss is None else f"{rss / 1e9:.2f}",
    ]


def _table(header, rows) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def ratios(a: dict, b: dict, rss_a: float, rss_b: float) -> dict:
    """a / b for step time, phase rates and peak RSS (below 1 for times and RSS, above 1 for rates, is a's win)."""
    return {
        "wall": a["wall"] / b["wall"],
        "generate": a["generate"] / b["generate"],
        "train": a["train"] / b["train"],
        "gen_tok_s": a["gen_tok_s"] / b["gen_tok_s"],
        "train_tok_s": a["train_tok_s"] / b["train_tok_s"],
        "peak_rss": rss_a / rss_b,
    }


def format_report(result: dict) -> str:
    """The per-step table, the means, and the rlvr / TRL ratios, as markdown."""
    spec, fw, warm = result["spec"], result["frameworks"], result["warmup"]
    c = result["ceilings_gflops"]
    head = [
        f"shape: {spec['prompts']} prompts x {spec['group']} completions, max {spec['max_new_tokens']} new tokens, "
        f"{'LoRA r=16' if spec['lora'] else 'full fine-tune'}, update in {'bf16' if spec['bf16'] else 'float32'}, "
        f"{spec['threads']} threads, seed {spec['seed']}; model {spec['model']}; config {spec.get('config', 'default')}"
        + "".join(f" --set {x}" for x in spec.get("sets", ())),
        f"ceiling probe ({result.get('probe_size', '')} matmul): "
        + ", ".join(f"{d} {g:.0f} GFLOP/s" for d, g in c.items())
        + f"; memory read {result.get('read_gb_s', 0):.1f} GB/s; decode reads "
        + ", ".join(f"{n}'s weights in {f.get('decode_dtype', '?')}" for n, f in fw.items())
        + f"; step(s) {', '.join(str(i) for i in range(warm)) or 'none'} = warm-up (*)",
        "torch threads seen in each child: "
        + ", ".join(f"{n} {sorted({r.get('threads') for r in f['steps']})}" for n, f in fw.items()),
    ]
    rows = []
    for name, f in fw.items():
        for r in f["steps"]:
            rows.append(_row(name, f"{r['step']}{'*' if r['step'] < warm else ''}", r, r["rss"]))
    for name, f in fw.items():
        if f["mean"]:
            rows.append(_row(name, "mean", f["mean"], f["peak_rss"]))
    out = "\n".join(head) + "\n\n" + _table(COLUMNS, rows)
    if "ratios" in result:
        q = result["ratios"]
        out += (
            "\n\nrlvr / TRL: step time {wall:.3f}, generate time {generate:.3f}, train time {train:.3f}, "
            "gen tok/s {gen_tok_s:.2f}x, train tok/s {train_tok_s:.2f}x, peak RSS {peak_rss:.2f}"
        ).format(**q)
        out += f"\nspeed-up of a step (TRL time / rlvr time): {1 / q['wall']:.1f}x"
    return out
