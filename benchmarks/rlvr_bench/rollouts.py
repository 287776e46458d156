"""`rlvr bench --vs ENGINE[,ENGINE...]`: rollout speed of rlvr's sampler against CPU inference engines, side by side.

Every side samples the GRPO shape (P prompts x G completions, at most N new tokens; 4 x 8 x 128 by default) from
the same model (rlvr's converted SmolLM2 folder by default, which each engine converts with its own tool), on the
same prompts (rlvr's seeded prompt stream through the chat template, token ids made once here), at the same
temperature with the same stop ids and thread count. Each engine and precision runs in its own child process
under its own venv's interpreter (rlvr_bench.engines; rlvr never imports an engine), started one at a time so
that their load times are not contended, and the parent then runs one batch of each in turn, so machine noise
lands on all alike. After the batches each side reloads its weights `--syncs` times, as a training step must
after every update: an engine converts the new safetensors with its tool and loads the result, vLLM loads the
tensors into its running engine, rlvr's sampler re-packs the weights from the training model.

Printed per side: tokens/s over the measured batches (total tokens / total seconds), the weight sync's seconds,
tokens/s with one sync a batch (what a training step gets), the fraction of the roofline at the rows alive
(rlvr_bench.roofline), load and conversion times, mean completion length and sampled-token log-prob (the same
model at the same temperature should give about the same), whether the engine returns log-probs, and rlvr's
ratio to each.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rlvr_bench.engines import ENGINES, engine_module, serve

OURS = "rlvr"
TORCH_OPS = "bf16-torch-ops"  # rlvr's sampler with RLVR_NATIVE=0: what its native fused ops buy, in the same run


def sampler_spec(args) -> dict:
    """Everything every child needs, the prompts as token ids included (so an engine's side needs no rlvr task)."""
    from transformers import AutoConfig, AutoTokenizer

    from rlvr.policy.load import resolve_model_path
    from rlvr.prompts.chat import encode_prompt
    from rlvr.sampling import stop_ids
    from rlvr_bench.child import bench_config, step_problems

    path = resolve_model_path(args.model)
    steps = args.warmup + args.steps
    cfg = bench_config(
        {
            "seed": args.seed,
            "prompts": args.prompts,
            "group": args.group,
            "lora": True,
            "bf16": True,
            "max_new_tokens": args.max_new_tokens,
            "sampler": args.sampler,
        }
    )
    task, problems = step_problems(cfg, steps)
    tokenizer = AutoTokenizer.from_pretrained(path)
    stops = stop_ids(AutoConfig.from_pretrained(path), tokenizer)
    r = cfg["rollout"]
    return {
        "model": path,
        "prompts": args.prompts,
        "group": args.group,
        "max_new_tokens": args.max_new_tokens,
        "temperature": r["temperature"],
        "top_p": r["top_p"],
        "top_k": r["top_k"],
        "seed": args.seed,
        "threads": args.threads,
        "steps": steps,
        "sampler": args.sampler,
        "stop_ids": stops,
        "prompt_ids": [[encode_prompt(tokenizer, task.messages(p)) for p in step] for step in problems],
    }


def run_rlvr_sampler(spec: dict) -> None:
    """Child: rlvr's sampler (`spec["sampler"]`, bf16) on each batch's prompts; its sync re-packs the weights from
    the model, as the trainer's sync does after every update."""
    import torch

    from rlvr.policy.load import load_policy
    from rlvr.sampling import make_sampler

    if not spec.get("native", True):  # the sampler's torch ops instead of its native fused ones (read at first build)
        os.environ["RLVR_NATIVE"] = "0"
    t0 = time.perf_counter()
    model, tokenizer = load_policy(spec["model"])
    model.eval()
    load_s = time.perf_counter() - t0
    sampler = make_sampler(
        spec["sampler"], model, tokenizer, stop_ids=spec["stop_ids"], dtype="bfloat16", threads=spec["threads"]
    )
    params = sum(p.numel() for p in model.parameters())  # a tied head counted once
    weight_bytes = 2 * sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))

    def generate(step: int, prompts: list[list[int]]) -> dict:
        generator = torch.Generator().manual_seed(spec["seed"] * 1_000_003 + step)
        with torch.inference_mode():
            ro = sampler.generate(
                prompts,
                spec["group"],
                max_new_tokens=spec["max_new_tokens"],
                temperature=spec["temperature"],
                top_p=spec["top_p"],
                top_k=spec["top_k"],
                generator=generator,
            )
        return step_result(
            [int(n) for n in ro.mask.sum(dim=1)],
            ro.finish.count("stop"),
            spec["threads"],
            float(ro.sampler_logp.sum() / ro.mask.sum()),
        )

    def sync() -> dict:
        t = time.perf_counter()
        with torch.inference_mode():
            sampler.sync(model)
        return {"convert_s": 0.0, "load_s": time.perf_counter() - t}

    from rlvr_bench.child import versions

    serve(
        spec,
        generate,
        sync,
        {
            "convert_s": 0.0,
            "load_s": load_s,
            "params": params,
            "weight_bytes": weight_bytes,
            "versions": versions(),
            "precision": "bf16",
            "logprobs": "yes: every sampled token's, from the logits it was drawn from",
        },
    )


def step_result(lengths: list[int], stopped: int, threads: int, logp_mean: float | None) -> dict:
    """A batch's figures as every worker reports them: completion lengths (stop token included) and their sum."""
    return {
        "gen_tokens": sum(lengths),
        "rows": len(lengths),
        "stopped": stopped,
        "lengths": lengths,
        "mean_len": sum(lengths) / max(len(lengths), 1),
        "logp_mean": logp_mean,
        "threads": threads,
    }


def run_engine_worker(spec: dict) -> None:
    """Child, under an engine's venv: the engine module's worker."""
    engine_module(spec["engine"]).run_worker(spec)


def entries(args, engines: list[str]) -> list[tuple[str, str, str]]:
    """(engine, precision, interpreter) of every side, rlvr's sampler first."""
    wanted = [p.strip() for p in args.precisions.split(",") if p.strip()] if args.precisions else None
    out = [(OURS, "bf16", sys.executable)] + ([(OURS, TORCH_OPS, sys.executable)] if args.torch_ops else [])
    for name in engines:
        precisions = engine_module(name).PRECISIONS
        for p in precisions:
            if wanted is None or p in wanted:
                out.append((name, p, engine_python(args, name)))
    return out


def engine_python(args, name: str) -> str:
    return getattr(args, f"{name}_python")


def bench_vs_engines(args, engines: list[str]) -> dict:
    """Probe the machine, start every side one at a time, alternate their batches, then time their syncs."""
    from rlvr_bench.parent import Worker, matmul_gflops
    from rlvr_bench.roofline import read_floor_s

    spec = sampler_spec(args)
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="rlvr-bench-engines-"))
    gflops = matmul_gflops(args.probe_size, "bfloat16", args.threads)
    sides = entries(args, engines)
    workers, ready = {}, {}
    try:
        for name, precision, python in sides:
            key = f"{name} {precision}"
            child = (
                {**spec, "native": precision != TORCH_OPS}
                if name == OURS
                else {**spec, "engine": name, "precision": precision, "work_dir": str(work / f"{name}-{precision}")}
            )
            workers[key] = Worker("rlvr-sampler" if name == OURS else "engine", python, child, args.verbose, label=key)
            ready[key] = workers[key].read("ready")
            print(
                f"{key}: ready (convert {ready[key].get('convert_s', 0):.1f} s, load {ready[key]['load_s']:.1f} s)",
                file=sys.stderr,
                flush=True,
            )
        params, weight_bytes = ready[f"{OURS} bf16"]["params"], ready[f"{OURS} bf16"]["weight_bytes"]
        read_s = read_floor_s(weight_bytes)
        steps: dict[str, list[dict]] = {k: [] for k in workers}
        for _ in range(spec["steps"]):
            for k, w in workers.items():
                s = w.step()
                steps[k].append(s)
                print(
                    f"{k} batch {s['step']}: {s['gen_tokens']} tokens in {s['seconds']:.1f} s "
                    f"({s['gen_tokens'] / max(s['seconds'], 1e-9):.0f} tok/s)",
                    file=sys.stderr,
                    flush=True,
                )
        syncs = {k: timed_syncs(k, w, args.syncs) for k, w in workers.items()}
        for k, w in workers.items():
            if not (syncs[k] and "error" in syncs[k][-1]):
                w.close()
    finally:
        for w in workers.values():
            w.kill()
    prompt_tokens = [sum(len(p) for p in step) for step in spec["prompt_ids"]]
    sides_out = {
        k: side_figures(
            steps[k][args.warmup :], prompt_tokens[args.warmup :], syncs[k], ready[k], params, read_s, gflops
        )
        for k in workers
    }
    return {
        "spec": {k: v for k, v in spec.items() if k != "prompt_ids"},
        "ceiling_bf16_gflops": gflops,
        "read_floor_s": read_s,
        "params": params,
        "weight_bytes": weight_bytes,
        "warmup": args.warmup,
        "command": " ".join(sys.argv),
        "steps": steps,
        "syncs": syncs,
        "sides": sides_out,
        "ready": ready,
    }


def timed_syncs(key: str, worker, n: int) -> list[dict]:
    """n weight syncs of one side; a side whose sync fails keeps its batches, with the error in place of a time."""
    from rlvr_bench.parent import BenchError

    out = []
    for _ in range(n):
        try:
            out.append(worker.command("sync", "sync"))
        except BenchError as e:
            print(f"{key}: sync failed: {str(e)[-600:]}", file=sys.stderr, flush=True)
            return out + [{"error": str(e).splitlines()[-1][:300]}]
    return out


def side_figures(
    batches: list[dict],
    prompt_tokens: list[int],
    syncs: list[dict],
    ready: dict,
    params: int,
    read_s: float,
    gflops: float,
) -> dict:
    """One side's means over the measured batches: tokens/s (totals over totals), with one sync a batch, and as a
    fraction of the roofline at the rows alive."""
    from rlvr_bench.roofline import batch_roofline_s

    tokens, seconds = sum(b["gen_tokens"] for b in batches), sum(b["seconds"] for b in batches)
    timed = [s["seconds"] for s in syncs if "seconds" in s]
    sync_s = statistics.median(timed) if timed else (float("nan") if syncs else 0.0)
    roof = sum(
        batch_roofline_s(b["lengths"], pt, params, read_s, gflops)
        for b, pt in zip(batches, prompt_tokens)
        if b.get("lengths")
    )
    logps = [b["logp_mean"] for b in batches if b.get("logp_mean") is not None]
    return {
        "gen_tokens": tokens,
        "seconds": seconds,
        "tok_s": tokens / seconds if seconds > 0 else 0.0,
        "sync_s": sync_s,
        "tok_s_with_sync": tokens / (seconds + len(batches) * sync_s) if seconds > 0 else 0.0,
        "roofline_frac": roof / seconds if seconds > 0 and all(b.get("lengths") for b in batches) else None,
        "mean_len": tokens / max(sum(b["rows"] for b in batches), 1),
        "logp_mean": sum(logps) / len(logps) if logps else None,
        "load_s": ready["load_s"],
        "convert_s": ready.get("convert_s", 0.0),
        "logprobs": ready.get("logprobs", ""),
        "versions": ready.get("versions", {}),
    }


def format_vs_engines(result: dict) -> str:
    """Per-batch tokens/s of every side, then the summary table with rlvr's ratios, as markdown."""
    spec, warm, sides = result["spec"], result["warmup"], result["sides"]
    ours = f"{OURS} bf16"
    head = (
        f"shape: {spec['prompts']} prompts x {spec['group']} completions, max {spec['max_new_tokens']} new tokens, "
        f"temperature {spec['temperature']}, {spec['threads']} threads, seed {spec['seed']}; model {spec['model']}\n"
        f"bf16 matmul probe {result['ceiling_bf16_gflops']:.0f} GFLOP/s; read floor {1e3 * result['read_floor_s']:.1f} ms "
        f"a step ({result['weight_bytes'] / result['read_floor_s'] / 1e9:.1f} GB/s over {result['weight_bytes'] / 1e6:.0f} MB "
        f"of bf16 weights); batch(es) {', '.join(map(str, range(warm))) or 'none'} = warm-up (*)"
    )
    keys = list(sides)
    per_batch = ["| batch | " + " | ".join(f"{k} tok/s" for k in keys) + " |", "|---|" + "---|" * len(keys)]
    for i in range(len(result["steps"][ours])):
        cells = [f"{s['gen_tokens'] / s['seconds']:.0f}" for s in (result["steps"][k][i] for k in keys)]
        per_batch.append(f"| {i}{'*' if i < warm else ''} | " + " | ".join(cells) + " |")
    rows = [
        "| side | tok/s | weight sync s | tok/s with a sync a batch | % of roofline | rlvr / it | rlvr / it with "
        "syncs | load s | convert s | mean length | mean log-prob | log-probs |",
        "|" + "---|" * 12,
    ]
    base = sides[ours]
    for k in keys:
        s = sides[k]
        roof = "" if s["roofline_frac"] is None else f"{100 * s['roofline_frac']:.1f}%"
        logp = "" if s["logp_mean"] is None else f"{s['logp_mean']:.3f}"
        ratio = base["tok_s"] / s["tok_s"] if s["tok_s"] else float("nan")
        ratio_sync = base["tok_s_with_sync"] / s["tok_s_with_sync"] if s["tok_s_with_sync"] else float("nan")
        rows.append(
            f"| {k} | {s['tok_s']:.0f} | {s['sync_s']:.2f} | {s['tok_s_with_sync']:.0f} | {roof} | "
            f"{ratio:.2f}x | {ratio_sync:.2f}x | {s['load_s']:.1f} | {s['convert_s']:.1f} | {s['mean_len']:.1f} | "
            f"{logp} | {s['logprobs']} |"
        )
    versions = "; ".join(f"{k}: " + ", ".join(f"{n} {v}" for n, v in s["versions"].items()) for k, s in sides.items())
    return head + "\n\n" + "\n".join(per_batch) + "\n\n" + "\n".join(rows) + "\n\nversions: " + versions


def parse_engines(vs: str) -> list[str] | None:
    """The engines `--vs` names ("engines" = all of them), or None when it names something else."""
    names = list(ENGINES) if vs == "engines" else [n.strip() for n in vs.split(",") if n.strip()]
    return names if names and all(n in ENGINES for n in names) else None


def run_vs_engines(args, engines: list[str]) -> int:
    """The engine branch of `rlvr bench`: exit 2 on a usage error, 1 when a side cannot run."""
    from rlvr_bench.parent import check_peer_python, measure_and_print

    for name in engines:
        mod, python = engine_module(name), engine_python(args, name)
        if not python:
            print(
                f"rlvr bench --vs {name}: give --{name}-python (or $RLVR_{name.upper()}_PYTHON), the interpreter of "
                f"a venv with {name}: {mod.RECIPE}",
                file=sys.stderr,
            )
            return 2
        why = check_peer_python(python, mod.PACKAGES, mod.RECIPE)
        if why:
            print(f"rlvr bench --vs {name}: --{name}-python {why}", file=sys.stderr)
            return 1
    return measure_and_print(
        f"rlvr bench --vs {','.join(engines)}", lambda: bench_vs_engines(args, engines), format_vs_engines, args.json
    )


__all__ = [
    "sampler_spec",
    "run_rlvr_sampler",
    "run_engine_worker",
    "bench_vs_engines",
    "side_figures",
    "format_vs_engines",
    "parse_engines",
    "run_vs_engines",
    "step_result",
]
