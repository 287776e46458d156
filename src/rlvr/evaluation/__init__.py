"""Honest evaluation: pass@k with intervals over problems, held-out hygiene, paired comparisons."""

from rlvr.evaluation.records import EvalRecord, read_records, write_records
from rlvr.evaluation.stats import (bootstrap_ci, mean_correct, paired_bootstrap, paired_verdict, pass_at_k,
                                   wilson_interval)
from rlvr.evaluation.summary import summarize, summary_markdown, write_summary

__all__ = ["EvalRecord", "read_records", "write_records", "bootstrap_ci", "mean_correct", "paired_bootstrap",
           "paired_verdict", "pass_at_k", "wilson_interval", "summarize", "summary_markdown", "write_summary"]
