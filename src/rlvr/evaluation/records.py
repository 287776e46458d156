"""One evaluation record per sampled completion, and reading/writing them as JSON lines.

Greedy decodes are records too, with mode="greedy" and sample_idx 0: one flat list holds a whole
evaluation, and the summary keeps the two sets apart.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from rlvr.rundir.files import atomic_write_text  # noqa: F401  (re-exported: summary and compare use it)
from rlvr.verifiers.base import STATUSES

MODES = ("sampled", "greedy")


@dataclass(frozen=True)
class EvalRecord:
    """One completion of one problem, with the verifier's verdict on it."""

    problem_id: str
    band: str
    sample_idx: int
    status: str
    reward: float
    extracted: str | None
    completion: str
    mode: str = "sampled"
    # the lenient verdict (rlvr.evaluation.lenient): the final number or expression whatever the format, graded by
    # the same verifier; None where not scored (a code task, or an evaluation from before lenient scoring)
    lenient: str | None = None

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"unknown verdict status {self.status!r}; choose from {', '.join(STATUSES)}")
        if self.lenient is not None and self.lenient not in STATUSES:
            raise ValueError(f"unknown lenient status {self.lenient!r}; choose from {', '.join(STATUSES)}")
        if self.mode not in MODES:
            raise ValueError(f"unknown record mode {self.mode!r}; choose from {', '.join(MODES)}")

    @property
    def correct(self) -> bool:
        return self.status == "correct"

    def to_dict(self) -> dict:
        return asdict(self)


def by_problem(records: Iterable[EvalRecord], mode: str = "sampled") -> dict[str, tuple[str, list[bool]]]:
    """{problem_id: (band, [correct per sample, in sample_idx order])} for one mode, in first-seen order.

    Raises ValueError on a repeated (problem_id, sample_idx) or a problem seen under two bands: both mean
    two evaluations were mixed up, and averaging them would quietly be wrong.
    """
    seen: dict[str, tuple[str, dict[int, bool]]] = {}
    for r in records:
        if r.mode != mode:
            continue
        band, samples = seen.setdefault(r.problem_id, (r.band, {}))
        if band != r.band:
            raise ValueError(f"problem {r.problem_id!r} appears in bands {band!r} and {r.band!r}")
        if r.sample_idx in samples:
            raise ValueError(f"problem {r.problem_id!r} has sample {r.sample_idx} twice ({mode})")
        samples[r.sample_idx] = r.correct
    return {pid: (band, [s[i] for i in sorted(s)]) for pid, (band, s) in seen.items()}


def write_records(records: Sequence[EvalRecord], path: str | Path) -> Path:
    """One JSON object per line, atomically."""
    return atomic_write_text(path, "".join(json.dumps(r.to_dict()) + "\n" for r in records))


def read_records(path: str | Path) -> list[EvalRecord]:
    """Read what write_records wrote; a bad line raises ValueError naming the file and line number."""
    out = []
    with open(path, encoding="utf-8") as f:
        for line_no, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                out.append(EvalRecord(**json.loads(line)))
            except (ValueError, TypeError) as e:
                raise ValueError(f"{path}: line {line_no}: not an evaluation record ({e})") from None
    return out
