"""Train the same config several times, changing one setting, for the same wall-clock budget; plot and tabulate.

    python benchmarks/compare_runs.py --vary algorithm=grpo,dapo,gspo,dr_grpo --minutes 3 --out docs/figures/presets
    python benchmarks/compare_runs.py --vary curriculum=fixed,adaptive --minutes 3 --out docs/figures/curricula

Each variant is a real `rlvr.training.loop.train` run of the base preset (default: `default`, with `--set` overrides)
into OUT/<variant>/; the script then prints a markdown table (mean over steps of reward, nonzero-variance
fraction, entropy, length, steps done) and writes OUT/curves.png with one curve per variant. It asserts
nothing: it measures.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

VARIANT_SETS = {
    "algorithm": lambda v: [f"algorithm={{preset: {v}}}"],
    "curriculum": lambda v: ["curriculum={}" if v == "uniform" else f"curriculum={{kind: {v}}}"],
}
CURVES = [
    ("reward/mean", "training reward"),
    ("groups/nonzero_var_frac", "nonzero-variance fraction"),
    ("entropy", "entropy (nats/token)"),
    ("len/mean", "mean completion length"),
]


def main() -> None:
    from rlvr.config import resolve
    from rlvr.evaluation.report import _smooth
    from rlvr.training.loop import train

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", default="default")
    ap.add_argument("--vary", required=True, help="KEY=v1,v2,... with KEY in " + ", ".join(VARIANT_SETS))
    ap.add_argument("--minutes", type=float, default=3.0)
    ap.add_argument("--set", dest="sets", action="append", default=[])
    ap.add_argument("--out", default="runs/compare")
    args = ap.parse_args()
    key, values = args.vary.split("=", 1)
    out = Path(args.out)
    results = {}
    for value in values.split(","):
        run = out / value
        sets = (
            args.sets
            + VARIANT_SETS[key](value)
            + [f"output_dir={run}", f"train.time_budget_min={args.minutes}", "log.eval_every=0"]
        )
        if not (run / "final").exists():
            train(resolve(args.base, sets), overwrite=True)
        results[value] = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    print(f"| {key} | steps | reward | nonzero-var frac | entropy | length | s/step |")
    print("|---|---|---|---|---|---|---|")
    for value, rows in results.items():
        mean = lambda k, rows=rows: sum(r[k] for r in rows) / len(rows)  # noqa: E731
        print(
            f"| {value} | {len(rows)} | {mean('reward/mean'):.3f} | {mean('groups/nonzero_var_frac'):.2f} | "
            f"{mean('entropy'):.2f} | {mean('len/mean'):.1f} | {mean('time/step'):.1f} |"
        )
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(CURVES), figsize=(4 * len(CURVES), 3.4))
    for ax, (metric, title) in zip(axes, CURVES):
        for value, rows in results.items():
            ax.plot([r["step"] for r in rows], _smooth([r[metric] for r in rows], 3), label=value, lw=2)
        ax.set_title(title)
        ax.set_xlabel("step")
    axes[0].legend(fontsize="small")
    fig.suptitle(f"{key}: same base config, {args.minutes:g} minutes each")
    fig.tight_layout()
    out.mkdir(parents=True, exist_ok=True)
    fig.savefig(out / "curves.png", dpi=110)
    print(f"figure: {out / 'curves.png'}")


if __name__ == "__main__":
    main()
