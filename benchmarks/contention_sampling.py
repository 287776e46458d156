"""One sampling call of the default model (2 prompts x 8 samples x 48 new tokens, the fast sampler in float32, 2 torch
threads) timed alone, two side by side and beside a CPU hog, per OpenMP wait policy; with a hash of the sampled ids,
so the table also says whether the policy changed what was sampled. The short form of benchmarks/contention.py (the
whole default step), minutes instead of an hour. Nothing else may run on the machine meanwhile.

    python benchmarks/contention_sampling.py [--policies ACTIVE,PASSIVE,PASSIVE:1000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

from contention import policy_env  # ACTIVE, PASSIVE or POLICY:N (a spin count), as benchmarks/contention.py reads it

CALL = r"""
import hashlib, time, torch
from rlvr.policy.load import load_policy
from rlvr.sampling import make_sampler, stop_ids
model, tok = load_policy()
model.eval()
qs = [f"What is {a} + {b}? Put the answer in \\boxed{{}}." for a, b in ((17, 25), (304, 99))]
prompts = [tok.apply_chat_template([{"role": "user", "content": q}], add_generation_prompt=True, tokenize=True) for q in qs]
prompts = [p["input_ids"] if hasattr(p, "keys") else p for p in prompts]
s = make_sampler("fast", model, tok, stop_ids=stop_ids(model.config, tok), dtype="float32", threads=2)
t0 = time.perf_counter()
ro = s.generate(prompts, 8, max_new_tokens=48, temperature=1.0, generator=torch.Generator().manual_seed(0))
print(f"{time.perf_counter() - t0:.2f} {hashlib.sha1(str(ro.completion_ids.tolist()).encode()).hexdigest()[:8]}")
"""


def call(policy: str) -> subprocess.Popen:
    env = {**os.environ, **policy_env(policy)}
    return subprocess.Popen([sys.executable, "-c", CALL], env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)


def seconds(procs: list[subprocess.Popen]) -> list[tuple[float, str]]:
    out = []
    for p in procs:
        text, _ = p.communicate()
        s, h = text.decode().split()[-2:]
        out.append((float(s), h))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--policies", default="ACTIVE,PASSIVE")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(
        "| OMP_WAIT_POLICY | alone (s, best of n) | two side by side (s each; share of alone) | beside a CPU hog | ids |"
    )
    print("|---|---|---|---|---|")
    for policy in args.policies.split(","):
        alone = [seconds([call(policy)])[0] for _ in range(args.repeat)]
        pair = seconds([call(policy), call(policy)])
        hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        try:
            beside = seconds([call(policy)])[0]
        finally:
            hog.kill()
        best = min(s for s, _ in alone)
        hashes = {h for _, h in alone + pair + [beside]}
        pair_txt = " / ".join(f"{s:.1f} ({best / s:.0%})" for s, _ in pair)
        print(
            f"| {policy} | {best:.1f} | {pair_txt} | {beside[0]:.1f} ({best / beside[0]:.0%}) | {', '.join(hashes)} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
