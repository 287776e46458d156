"""The trainer on a CUDA GPU (`model.device`): rlvr's own parts on the device, each against the CPU, one table.

    python benchmarks/gpu_cuda_check.py MODELS OUT          # on a machine with one CUDA GPU
    python benchmarks/gpu_cuda_check.py MODELS OUT --device cpu   # the same parts with "cuda" read as "cpu": a dry run

MODELS holds `tiny/` (the tests' tiny random Llama with the default model's real tokenizer: conftest.save_tiny_model)
and `smol/` (the embedded default's config.json and tokenizer, no weights: the part `smol speed` builds random
weights of that shape on the device, so its figures are the default architecture's, its samples noise). Made here by
`python benchmarks/gpu_cuda_check.py --prepare MODELS`. Needs no vLLM and no network: what a machine with a GPU and
torch/transformers/peft but no PyPI can run. vLLM's parts stay with benchmarks/gpu_check.sh.

Parts (each under its own guard; a failed part is FAIL and the next one runs; exit 0 when all pass):
  update parity   tests/test_distributed.py's eight update cases (GRPO, DAPO, Dr. GRPO, GSPO, KL, clipping, mu 2,
                  an idle block) with the tiny model on the device against the CPU: loss, grad norm, weights
  adapter init    build_policy on the device against the CPU, same seed: the LoRA weights before training
  hf sampler      the hf backend's copy on the device: its sampler log-probs (float32) against the trainer's
                  forward of the same tokens on the device (mismatch), and where its outputs live
  train tiny      `rlvr train default` on the tiny model, model.device=cuda, 3 steps on each local sampler (hf on
                  the device, fast on the CPU from the device's weights), then --resume to step 5
  sft tiny        `rlvr sft` from reference traces (a function of the problem) with the policy on the device
  eval tiny       `rlvr eval` of the tiny hf run, its model on the device
  resume on cpu   the tiny hf run resumed with model.device=cpu to step 7 (a GPU checkpoint read on the CPU)
  smol speed      `rlvr train default` on random weights of the default model's shape, hf sampler, 3 steps:
                  seconds a step, generate / train split, tokens/s
  nccl update     benchmarks/gpu_check_update.py under torchrun with RLVR_DIST_BACKEND=nccl (a group of one)
Writes OUT/results.json and prints the table.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "src"))
RUN = [
    "--set", "rollout.prompts_per_step=4", "--set", "rollout.group_size=8", "--set", "rollout.max_new_tokens=128",
    "--set", "log.eval_every=0", "--set", "log.samples_every=1", "--set", "log.checkpoint_every=2",
    "--set", "eval.out_of_domain=[]",  # the default's reasoning-gym set needs a package the GPU machine may lack
]  # fmt: skip


def _parity_control():
    """reward.control for the tiny runs (gpu_cuda_check:ParityControl, a plug-in): 1 for a completion of an even
    number of characters, else 0. A random model never answers, so the real reward gives every group zero variance
    and the update no gradient; this gives about half the rows 1, so each step's update moves the weights."""
    from rlvr.verifiers.controls import ControlReward

    class ParityControl(ControlReward):
        def control_total(self, real, completions: list) -> list[float]:
            return [float(len(c) % 2 == 0) for c in completions]

    return ParityControl


def worked(problem) -> str:
    """sft.reference for the tiny SFT run (gpu_cuda_check:worked): the gold answer in the task's format."""
    return f"The answer is \\boxed{{{problem.answer}}}."


def __getattr__(name: str):  # the plug-in is built on first use, so this script imports without rlvr on the path
    if name == "ParityControl":
        return _parity_control()
    raise AttributeError(name)


def prepare(models: Path) -> None:
    """MODELS/tiny (weights + tokenizer, ~7 MB) and MODELS/smol (config + tokenizer), read from this machine."""
    from transformers import AutoTokenizer

    from conftest import save_tiny_model
    from rlvr.policy.load import DEFAULT_MODEL, embedded_gguf, resolve_model_path

    gguf = embedded_gguf(DEFAULT_MODEL)
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    save_tiny_model(tok, models / "tiny")
    smol = models / "smol"
    smol.mkdir(parents=True, exist_ok=True)
    (smol / "config.json").write_text((Path(resolve_model_path(DEFAULT_MODEL)) / "config.json").read_text())
    tok.save_pretrained(smol)


def update_parity(dev: str) -> tuple[str, dict]:
    from test_distributed import CASES, run_case

    gaps = {"loss_rel": 0.0, "grad_norm_rel": 0.0, "weight_abs": 0.0}
    for case in CASES:
        (cs, cw), (gs, gw) = run_case(case), run_case(case, device=dev)
        gaps["loss_rel"] = max(gaps["loss_rel"], abs(gs["loss"] - cs["loss"]) / max(abs(cs["loss"]), 1e-12))
        gaps["grad_norm_rel"] = max(gaps["grad_norm_rel"], abs(gs["grad_norm"] - cs["grad_norm"]) / cs["grad_norm"])
        gaps["weight_abs"] = max(gaps["weight_abs"], max(float((gw[k] - w).abs().max()) for k, w in cw.items()))
    ok = gaps["loss_rel"] < 1e-4 and gaps["grad_norm_rel"] < 1e-4 and gaps["weight_abs"] < 1e-5
    figure = f"{len(CASES)} cases; loss {gaps['loss_rel']:.1e} rel, grad norm {gaps['grad_norm_rel']:.1e} rel, "
    return ("PASS" if ok else "FAIL"), {"figure": figure + f"weights {gaps['weight_abs']:.1e}", **gaps}


def _tiny_cfg(models: Path, dev: str, *sets: str):
    from rlvr.config import as_config, resolve

    return as_config(resolve("default", [f"model.name={models / 'tiny'}", f"model.device={dev}", *sets]))


def adapter_init(models: Path, dev: str) -> tuple[str, dict]:
    from rlvr.policy.build import build_policy

    weights = {}
    for device in ("cpu", dev):
        model, _ = build_policy(_tiny_cfg(models, device))
        weights[device] = {n: p.detach().cpu() for n, p in model.named_parameters() if p.requires_grad}
        where = {str(p.device) for p in model.parameters()}
    gap = max(float((weights[dev][n] - w).abs().max()) for n, w in weights["cpu"].items())
    figure = f"{len(weights['cpu'])} LoRA tensors, largest gap {gap:.1e}; parameters on {sorted(where)}"
    return ("PASS" if gap == 0.0 and where == {str(_device(dev))} else "FAIL"), {"figure": figure, "gap": gap}


def _device(dev: str):
    import torch

    return torch.device("cuda", torch.cuda.current_device()) if dev == "cuda" else torch.device(dev)


def hf_sampler(models: Path, dev: str) -> tuple[str, dict]:
    import torch

    from rlvr.policy.build import build_policy
    from rlvr.policy.logprobs import completion_logprobs
    from rlvr.sampling import build_sampler

    cfg = _tiny_cfg(models, dev, "train.autocast=none")  # float32 on both sides: the gap is the devices' alone
    model, tok = build_policy(cfg)
    model.eval()
    sampler = build_sampler(dataclasses.replace(cfg.rollout, dtype="float32"), model, tok, backend="hf")
    prompts = [tok(f"What is {a} + {a}?")["input_ids"] for a in (3, 17, 250)]
    t0 = time.perf_counter()
    ro = sampler.generate(prompts, n=4, max_new_tokens=32, temperature=1.0, generator=torch.Generator().manual_seed(0))
    seconds = time.perf_counter() - t0
    with torch.no_grad():
        logp, _ = completion_logprobs(
            model,
            [prompts[i // 4] for i in range(len(prompts) * 4)],
            ro.completion_ids,
            ro.mask,
            pad_id=tok.pad_token_id,
        )
    gap = float(((logp - ro.sampler_logp) * ro.mask).abs().max())
    tokens = int(ro.mask.sum())
    figure = (
        f"{tokens} tokens in {seconds:.2f} s; sampler copy on {next(sampler.model.parameters()).device}, "
        f"outputs on {ro.completion_ids.device}; |trainer - sampler| log-prob {gap:.1e}"
    )
    return ("PASS" if gap < 1e-3 and ro.completion_ids.device.type == "cpu" else "FAIL"), {"figure": figure, "gap": gap}


def _cli(out: Path, models: Path, name: str, sets: list[str], extra: list[str], limit: int) -> tuple[int, str]:
    cmd = [sys.executable, "-m", "rlvr", "train", "default", *RUN, *sets, "--set", f"output_dir={out / name}", *extra]
    log = out / f"{name}.log"
    with open(log, "a") as f:
        f.write("+ " + " ".join(cmd) + "\n")
        f.flush()
        try:
            rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=limit).returncode
        except subprocess.TimeoutExpired:  # the steps it logged still count
            rc = 124
    return rc, str(log)


def _steps(run: Path) -> list[dict]:
    path = run / "metrics.jsonl"
    rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []
    return [r for r in rows if "loss" in r]


def train_tiny(models: Path, dev: str, out: Path) -> tuple[str, dict]:
    figures, ok = [], True
    for backend in os.environ.get("BACKENDS", "hf,fast").split(","):  # BACKENDS=hf: the hf run alone
        sets = ["--set", f"model.name={models / 'tiny'}", "--set", f"model.device={dev}"]
        sets += ["--set", f"rollout.backend={backend}", "--set", "reward.control=gpu_cuda_check:ParityControl"]
        rc, _ = _cli(out, models, f"tiny-{backend}", [*sets, "--set", "train.steps=3"], [], 300)
        rc2, _ = _cli(
            out,
            models,
            f"tiny-{backend}",
            [*sets, "--set", "train.steps=5"],
            ["--resume", "--allow-config-change"],
            300,
        )
        rows = _steps(out / f"tiny-{backend}")
        steps, moved = [r["step"] for r in rows], [r["grad_norm"] > 0 for r in rows]
        k3 = max((r.get("mismatch/k3_kl") or 0.0 for r in rows), default=0.0)
        ok &= rc == 0 and rc2 == 0 and steps == [0, 1, 2, 3, 4] and all(moved)
        figures.append(f"{backend}: rc {rc}/{rc2}, steps {steps}, grad norm > 0 at {sum(moved)}, k3 <= {k3:.1e}")
    return ("PASS" if ok else "FAIL"), {"figure": "; ".join(figures)}


def _sh(out: Path, name: str, cmd: list[str], limit: int) -> int:
    with open(out / f"{name}.log", "a") as f:
        f.write("+ " + " ".join(cmd) + "\n")
        f.flush()
        try:
            return subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=limit).returncode
        except subprocess.TimeoutExpired:
            return 124


def sft_tiny(models: Path, dev: str, out: Path) -> tuple[str, dict]:
    """`rlvr sft` from reference traces (sft.reference: gpu_cuda_check:worked) with the policy on the device."""
    run = out / "sft-tiny"
    sets = [f"model.name={models / 'tiny'}", f"model.device={dev}", "sft.source=reference", f"sft.output_dir={run}"]
    sets += ["sft.reference=gpu_cuda_check:worked", "sft.max_examples=64", "eval.out_of_domain=[]"]
    rc = _sh(
        out, "sft-tiny", [sys.executable, "-m", "rlvr", "sft", "default", *sum((["--set", x] for x in sets), [])], 300
    )
    data = json.loads((run / "sft_data.json").read_text()) if (run / "sft_data.json").exists() else {}
    merged = (run / "final" / "merged").exists()
    figure = f"rc {rc}, {data.get('steps', '?')} steps on {data.get('kept', data.get('examples', '?'))} traces, final/merged {merged}"
    return ("PASS" if rc == 0 and data.get("steps", 0) > 0 and merged else "FAIL"), {"figure": figure, **data}


def eval_tiny(dev: str, out: Path) -> tuple[str, dict]:
    """`rlvr eval` of the tiny hf run (its final/merged model on model.device, its hf sampler there)."""
    res = out / "eval-tiny"
    cmd = [sys.executable, "-m", "rlvr", "eval", "--model", str(out / "tiny-hf"), "--n", "4", "--limit", "12"]
    cmd += ["--max-new-tokens", "32", "--backend", "hf", "--set", f"model.device={dev}", "--out", str(res)]
    rc = _sh(out, "eval-tiny", cmd, 240)
    files = sorted(p.name for p in res.glob("*")) if res.exists() else []
    return ("PASS" if rc == 0 and files else "FAIL"), {"figure": f"rc {rc}, wrote {files[:4]}"}


def resume_on_cpu(models: Path, out: Path) -> tuple[str, dict]:
    """The tiny hf run, trained on the device to step 5, resumed on the CPU (model.device=cpu) to step 7: its
    checkpoint's tensors and optimizer state load where the parameters now are."""
    sets = ["--set", f"model.name={models / 'tiny'}", "--set", "model.device=cpu", "--set", "rollout.backend=hf"]
    sets += ["--set", "reward.control=gpu_cuda_check:ParityControl", "--set", "train.steps=7"]
    rc, _ = _cli(out, models, "tiny-hf", sets, ["--resume", "--allow-config-change"], 300)
    steps = [r["step"] for r in _steps(out / "tiny-hf")]
    return ("PASS" if rc == 0 and steps == list(range(7)) else "FAIL"), {"figure": f"rc {rc}, steps {steps}"}


def smol_speed(models: Path, dev: str, out: Path) -> tuple[str, dict]:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    folder = out / "smol-random"
    if not (folder / "config.json").exists():
        torch.manual_seed(0)
        config = AutoConfig.from_pretrained(models / "smol")
        AutoModelForCausalLM.from_config(config, dtype=torch.float32).save_pretrained(folder)
        AutoTokenizer.from_pretrained(models / "smol").save_pretrained(folder)
    res, ok = {}, True
    for device, limit in ((dev, 300),):
        sets = ["--set", f"model.name={folder}", "--set", f"model.device={device}", "--set", "rollout.backend=hf"]
        sets += ["--set", "reward.control=gpu_cuda_check:ParityControl"]  # rows with a gradient: a real update
        rc, _ = _cli(out, models, f"smol-{device}", [*sets, "--set", "train.steps=3"], [], limit)
        rows = _steps(out / f"smol-{device}")[1:] or _steps(out / f"smol-{device}")  # step 0 warms the kernels
        keys = ("time/step", "time/generate", "time/train", "throughput/gen_tok_s")
        res[device] = {k: sum(r.get(k, 0.0) for r in rows) / max(len(rows), 1) for k in keys}
        res[device]["rc"] = rc
        ok &= rc == 0
    figure = "; ".join(
        f"{d}: {r['time/step']:.1f} s a step (generate {r['time/generate']:.1f}, train {r['time/train']:.1f}), "
        f"{r['throughput/gen_tok_s']:.0f} tok/s, rc {r['rc']}"
        for d, r in res.items()
    )
    return ("PASS" if ok else "FAIL"), {"figure": figure, **res}


def nccl_update(out: Path) -> tuple[str, dict]:
    """benchmarks/gpu_check_update.py through an NCCL group of one process (as gpu_check.sh's part of that name)."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "1"]
    cmd.append(str(ROOT / "benchmarks" / "gpu_check_update.py"))
    env = {**os.environ, "RLVR_DIST_BACKEND": "nccl"}
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=env)
    (out / "nccl.log").write_text(done.stdout + done.stderr)
    last = (done.stdout.strip().splitlines() or ["{}"])[-1]
    return ("PASS" if done.returncode == 0 else "FAIL"), {"figure": last[:300]}


def main() -> int:
    if sys.argv[1] == "--prepare":
        prepare(Path(sys.argv[2]))
        return 0
    models, out = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
    dev = sys.argv[4] if len(sys.argv) > 4 and sys.argv[3] == "--device" else "cuda"
    out.mkdir(parents=True, exist_ok=True)
    os.environ["PYTHONPATH"] = f"{ROOT / 'src'}:{ROOT / 'benchmarks'}:{os.environ.get('PYTHONPATH', '')}"
    import torch

    env = {"torch": torch.__version__, "cuda": torch.cuda.is_available()}
    if torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name()
    print(json.dumps(env), flush=True)
    parts = {
        "update parity": lambda: update_parity(dev),
        "adapter init": lambda: adapter_init(models, dev),
        "hf sampler": lambda: hf_sampler(models, dev),
        "train tiny": lambda: train_tiny(models, dev, out),
        "sft tiny": lambda: sft_tiny(models, dev, out),
        "eval tiny": lambda: eval_tiny(dev, out),
        "resume on cpu": lambda: resume_on_cpu(models, out),
        "smol speed": lambda: smol_speed(models, dev, out),
        "nccl update": lambda: nccl_update(out),
    }
    only = os.environ.get("PARTS")
    results = {"env": env}
    for name, part in parts.items():
        if only and name not in only.split(","):
            continue
        t0 = time.perf_counter()
        try:
            status, info = part()
        except Exception as e:  # a part that breaks is a row of the table, not the end of the check
            status, info = "FAIL", {"figure": f"{type(e).__name__}: {str(e)[:300]}", "trace": traceback.format_exc()}
        info["seconds"] = round(time.perf_counter() - t0, 1)
        results[name] = {"status": status, **info}
        print(f"=== {name}: {status} ({info['seconds']} s) {info['figure']}", flush=True)
        if "trace" in info:
            print(info["trace"], flush=True)
        (out / "results.json").write_text(json.dumps(results, indent=1, default=str))
    bad = [n for n, r in results.items() if n != "env" and r["status"] != "PASS"]
    print(f"\n{len(results) - 1 - len(bad)} of {len(results) - 1} parts passed" + (f"; failed: {bad}" if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
