"""The figures and the summary table of benchmarks/gpu_check.sh. Standard library only: it runs with the machine's
own python3, so the table prints even when the check's venv could not be made.

    python3 benchmarks/gpu_check_table.py run RUN_DIR STEPS     # one training part's figure; exit 1 unless STEPS trained
    python3 benchmarks/gpu_check_table.py update JSON_LINE      # the NCCL update part's figure; exit 1 unless it agreed
    python3 benchmarks/gpu_check_table.py pytest LOG            # the gpu tests' figure; exit 3 when all skipped
    python3 benchmarks/gpu_check_table.py table RESULTS_TSV     # the table; exit 1 unless every part passed (or DRY)

RESULTS_TSV has one line per part: check, result (PASS / FAIL / SKIP / DRY), seconds, figure, tab-separated.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

HEADER = ("check", "result", "seconds", "figure")
GOOD = ("PASS", "DRY")
SKIP = 3  # the exit code that the script records as SKIP (no vLLM, no GPU): not a pass


def run_figure(run_dir: str, steps: int) -> tuple[str, int]:
    """'3/3 steps trained, 1234 tok/s, mismatch k3 1.2e-03' from a run's metrics.jsonl: the steps logged with a loss
    of the steps asked, the mean rollout tokens/s and the mean k3 KL(sampler || trainer) over the steps that
    measured it. Passes when every step asked was logged with a loss."""
    path = Path(run_dir) / "metrics.jsonl"
    if not path.exists():
        return f"no {path}", 1
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    trained = sum("loss" in r for r in rows)
    parts = [f"{trained}/{steps} steps trained"]
    rates = [r["throughput/gen_tok_s"] for r in rows if r.get("throughput/gen_tok_s") is not None]
    if rates:
        parts.append(f"{sum(rates) / len(rates):.0f} tok/s")
    k3 = [r["mismatch/k3_kl"] for r in rows if r.get("mismatch/k3_kl") is not None]
    if k3:
        parts.append(f"mismatch k3 {sum(k3) / len(k3):.1e}")
    return ", ".join(parts), 0 if trained == steps else 1


def update_figure(line: str) -> tuple[str, int]:
    """The figure of benchmarks/gpu_check_update.py's JSON line (backend, cases, largest gaps, all-reduces)."""
    try:
        r = json.loads(line)
    except ValueError:
        return "no result line", 1
    figure = (
        f"{r['backend']} world {r['world']}: {r['cases']} cases, {r['all_reduces']} all-reduces, "
        f"loss gap {r['loss_gap']:.1e}, weight gap {r['weight_gap']:.1e}"
    )
    return figure, 0 if r["ok"] else 1


def pytest_figure(log: str) -> tuple[str, int]:
    """pytest's closing counts ('2 passed', '1 failed, 1 passed', '2 skipped'), without the time."""
    lines = [x.strip("= ").strip() for x in Path(log).read_text().splitlines() if x.strip()]
    counts = next((x for x in reversed(lines) if re.search(r"\d+ (passed|failed|skipped|error)", x)), "")
    counts = re.sub(r" in [\d.]+s.*$", "", counts)
    if not counts:
        return "no pytest summary", 1
    if "passed" not in counts and "skipped" in counts and "failed" not in counts and "error" not in counts:
        return counts, SKIP
    return counts, 0 if "passed" in counts and "failed" not in counts and "error" not in counts else 1


def table(results: str) -> tuple[str, int]:
    """The parts as one aligned Markdown table; exit 1 unless every part passed (a dry run passes)."""
    rows = [tuple(line.split("\t")) for line in Path(results).read_text().splitlines() if line.strip()]
    rows = [r + ("",) * (len(HEADER) - len(r)) for r in rows]
    width = [max(len(r[i]) for r in (HEADER, *rows)) for i in range(len(HEADER))]

    def line(cells) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, width)) + " |"

    out = [line(HEADER), "|" + "|".join("-" * (w + 2) for w in width) + "|", *map(line, rows)]
    failed, dry = [r[0] for r in rows if r[1] not in GOOD], sum(r[1] == "DRY" for r in rows)
    summary = f"{sum(r[1] == 'PASS' for r in rows)}/{len(rows)} parts passed"
    summary += f"; not passed: {', '.join(failed)}" if failed else ""
    out.append(summary + (f"; {dry} dry (printed, not run)" if dry else ""))
    return "\n".join(out), 1 if failed or not rows else 0


def main(argv: list[str]) -> int:
    verbs = {
        "run": lambda a: run_figure(a[0], int(a[1])),
        "update": lambda a: update_figure(a[0]),
        "pytest": lambda a: pytest_figure(a[0]),
        "table": lambda a: table(a[0]),
    }
    if not argv or argv[0] not in verbs:
        print(f"usage: gpu_check_table.py {{{'|'.join(verbs)}}} ARGS", file=sys.stderr)
        return 2
    text, code = verbs[argv[0]](argv[1:])
    print(text)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
