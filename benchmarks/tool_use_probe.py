"""Where a model stands on tool_arithmetic: held-out episodes with the calculator offered, beside the same problems
asked without tools (the no_tools control's prompt). Prints each side's overall summary and episode figures, and a
few transcripts.

    python benchmarks/tool_use_probe.py [N_SAMPLES] [N_PROBLEMS] [MODEL] [DTYPE]
    python benchmarks/tool_use_probe.py 2 16 smollm2-135m-instruct float32
"""

import json
import sys
import time

from rlvr.config import as_config
from rlvr.evaluation.run_eval import EvalSettings, evaluate_model

TOOLS = {"environment": "tool", "tools": ["calculator"], "max_turns": 3, "max_total_tokens": 256}


def main(n: int, limit: int, model: str, dtype: str) -> None:
    rollout = {"backend": "fast", "dtype": dtype}
    for label, episode, settings in (
        ("tools", TOOLS, {"per_band": 100}),
        ("no tools", None, {"per_band": 100, "with_tools": False}),
    ):
        t0 = time.perf_counter()
        records, summary = evaluate_model(
            model,
            "tool_arithmetic",
            EvalSettings(n=n, ks=(1,), max_new_tokens=64, backend="fast", limit=limit, progress=False),
            task_settings=settings,
            cfg=as_config({"rollout": rollout, "episode": episode or {}}),
        )
        print(f"{label}: {time.perf_counter() - t0:.1f} s", json.dumps(summary["overall"]))
        print("episodes:", json.dumps(summary.get("episodes")))
        for r in records[:3]:
            print("---", r.status, r.reward, repr(r.completion[:400]))


if __name__ == "__main__":
    args = sys.argv[1:]
    main(
        int(args[0]) if args else 2,
        int(args[1]) if len(args) > 1 else 16,
        args[2] if len(args) > 2 else "smollm2-135m-instruct",
        args[3] if len(args) > 3 else "float32",
    )
