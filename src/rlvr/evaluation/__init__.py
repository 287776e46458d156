"""Honest evaluation: pass@k with intervals over problems, held-out hygiene, paired comparisons.

stats     pass@k, bootstrap and paired-bootstrap intervals, verdicts, Wilson interval
records   one EvalRecord per completion (sampled or greedy); JSON lines in and out
driver    evaluate(policy_generate, reward, problems, ...) -> records
summary   summarize(records, ks) per band and overall; markdown and JSON
hygiene   contamination between training and evaluation problems; gold answers leaking into prompts
compare   models side by side with paired differences and a verdict per band; markdown, JSON, PNG
run_eval  evaluating a model, path or run directory on a task split (what `rlvr eval` calls)
validation  greedy accuracy on validation problems during training
report    the main job's report.md and its plots
learning_signal  why steps carried no learning signal (no informative group) and what to do: one pure diagnosis

In: a model and problems (or records already written). Out: records, summaries, comparisons, the report.
"""

from rlvr.evaluation.compare import compare, compare_markdown, compare_plot, write_comparison
from rlvr.evaluation.driver import evaluate
from rlvr.evaluation.records import EvalRecord, read_records, write_records
from rlvr.evaluation.stats import (
    bootstrap_ci,
    mean_correct,
    paired_bootstrap,
    paired_verdict,
    pass_at_k,
    wilson_interval,
)
from rlvr.evaluation.summary import summarize, summary_markdown, write_summary
from rlvr.tasks.hygiene import ContaminationError, check_contamination, find_contamination, find_leaks, normalize_text

__all__ = [
    "compare",
    "compare_markdown",
    "compare_plot",
    "write_comparison",
    "evaluate",
    "ContaminationError",
    "check_contamination",
    "find_contamination",
    "find_leaks",
    "normalize_text",
    "EvalRecord",
    "read_records",
    "write_records",
    "bootstrap_ci",
    "mean_correct",
    "paired_bootstrap",
    "paired_verdict",
    "pass_at_k",
    "wilson_interval",
    "summarize",
    "summary_markdown",
    "write_summary",
]
