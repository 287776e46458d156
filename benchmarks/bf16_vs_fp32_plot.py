"""Two paths of the same 20 GRPO steps (benchmarks/bf16_vs_fp32.sh; PAIR=precision: bf16 vs float32, PAIR=native:
native fused decode ops vs torch's): mean figures, the paired per-step reward difference with a bootstrap
interval, and the figure (path given as the argument). Prints; asserts nothing."""

import json
import os
import random
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def load(path):
    return [json.loads(line) for line in open(os.path.join(os.environ.get("OUT", "/tmp/eqv"), path, "metrics.jsonl"))]


NATIVE = os.environ.get("PAIR", "precision") == "native"
A, B = ("native", "torch") if NATIVE else ("bf16", "fp32")
LABELS = (
    ("bf16 sampler, native fused ops (default)", "bf16 sampler, torch ops")
    if NATIVE
    else ("bf16 sampler + bf16 autocast (default)", "float32 sampler + float32 update")
)
a, b = load(A), load(B)
n = min(len(a), len(b))
keys = [
    "reward/mean",
    "verdict/correct_frac",
    "verdict/no_answer_frac",
    "len/mean",
    "time/step",
    "time/generate",
    "time/train",
]
for k in keys:
    ma = sum(r[k] for r in a[:n]) / n
    mb = sum(r[k] for r in b[:n]) / n
    print(f"{k:28s} {A} {ma:8.3f}  {B} {mb:8.3f}")
d = [a[i]["reward/mean"] - b[i]["reward/mean"] for i in range(n)]
rng = random.Random(0)
boots = sorted(sum(rng.choice(d) for _ in range(n)) / n for _ in range(10000))
print(
    f"mean reward difference {A} - {B} over {n} steps: {sum(d) / n:+.3f} [{boots[250]:+.3f}, {boots[9750]:+.3f}] (95% bootstrap over steps)"
)
# second half: after the early no_answer collapse
h = n // 2
for name, rows in ((A, a), (B, b)):
    print(name, "steps", h, "-", n - 1, "mean reward", round(sum(r["reward/mean"] for r in rows[h:n]) / (n - h), 3))
fig, ax = plt.subplots(1, 2, figsize=(11, 4))
for name, rows, c in ((LABELS[0], a, "tab:blue"), (LABELS[1], b, "tab:orange")):
    ax[0].plot([r["step"] for r in rows], [r["reward/mean"] for r in rows], "-o", ms=3, color=c, label=name)
    ax[1].plot([r["step"] for r in rows], [r["verdict/no_answer_frac"] for r in rows], "-o", ms=3, color=c, label=name)
ax[0].set(title="training reward per step (32 completions)", xlabel="step", ylabel="mean reward")
ax[1].set(title="no_answer fraction per step", xlabel="step")
ax[0].legend(fontsize=8)
fig.suptitle(f"Same seed, same prompts: {LABELS[0]} vs {LABELS[1]} (GRPO, 4 x 8, 64 new tokens)")
fig.tight_layout()
fig.savefig(sys.argv[1] if len(sys.argv) > 1 else "/tmp/eqv/bf16_vs_fp32.png", dpi=110)
