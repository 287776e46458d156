"""Scoring a file of completions, and auditing a verifier: the work behind `rlvr verify` and `rlvr audit`
for answer verifiers (the parsers live in rlvr.cli.verify / rlvr.cli.audit).

    rlvr verify --verifier math --input IN.jsonl --output OUT.jsonl [--on-bad-line skip|fail]
    rlvr audit --verifier math [--verbose]

`verify` reads lines with `completion` and the gold answer, in the first of `answer`, `gold`, `solution`,
`ground_truth` the line has (the gold-column rule, rlvr.tasks.base.GOLD_COLUMNS), writes each back with `status`, `reward`,
`extracted` (and `detail`), in input order, flushed chunk by chunk so a failure never loses what was
already written; a malformed line is reported with its line number and skipped, or stops the run
(exit 2) with every earlier line written. A count per status goes to stderr.
"""

from __future__ import annotations

import json
import sys
from collections import Counter

from rlvr.config import ConfigError
from rlvr.tasks.base import GOLD_COLUMNS, final_gold, gold_column
from rlvr.verifiers.base import STATUSES
from rlvr.verifiers.pool import score_batch
from rlvr.verifiers.registry import KINDS, build_verifier
from rlvr.yaml_io import load_yaml

CHUNK = 256  # lines scored per pool batch; output is flushed after each


def parse_settings(pairs: list[str]) -> dict:
    out = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep:
            raise ConfigError(f"--set {pair!r}: expected KEY=VALUE")
        out[key.strip()] = load_yaml(value, f"--set {pair!r}")
    return out


def _read_line(raw: str, where: str) -> tuple[dict | None, str | None]:
    """(row, None) for a usable line, (None, reason) for a malformed one."""
    try:
        row = json.loads(raw)
    except json.JSONDecodeError as e:
        return None, f"{where}: not JSON ({e.msg})"
    if not isinstance(row, dict):
        return None, f"{where}: expected a JSON object, got {type(row).__name__}"
    if "completion" not in row:
        return None, f"{where}: missing key 'completion'"
    if not any(k in row for k in (*GOLD_COLUMNS, "entry", "tests")):
        return None, (
            f"{where}: no gold answer (give one of the keys {', '.join(GOLD_COLUMNS)}); tasks with richer "
            f"golds read 'entry' or 'tests'"
        )
    if not isinstance(row["completion"], (str, list)):
        return None, f"{where}: 'completion' must be a string or a list of messages"
    return row, None


def _flush(rows: list, score, out) -> Counter:
    """Score a chunk of rows (score(rows) -> [(verdict, reward)]) and write them, in order, flushed."""
    scored = score(rows)
    for row, (v, reward) in zip(rows, scored):
        out.write(
            json.dumps(
                {**row, "status": v.status, "reward": reward, "extracted": v.extracted, "detail": v.detail},
                ensure_ascii=False,
            )
            + "\n"
        )
    out.flush()
    return Counter(v.status for v, _ in scored)


def verifier_scorer(args):
    """Rows scored by one verifier (--verifier KIND --set ...): the verdict's own reward."""
    verifier = build_verifier(args.verifier or "math", parse_settings(args.set), "verifier")

    def score(rows):
        golds = [None if (k := gold_column(r)) is None else final_gold(str(r[k])) for r in rows]
        verdicts = score_batch(verifier, [r["completion"] for r in rows], golds, args.workers, args.timeout_s)
        return [(v, v.reward) for v in verdicts]

    return score


def task_from_args(args, does: str):
    """The task of `--task NAME` with its settings from `--set task.settings.KEY=VALUE` (its own grader is used, so
    --verifier and any other --set beside it are refused)."""
    from rlvr.config import parse_set
    from rlvr.tasks import load_task

    others = [item for item in args.set or [] if not item.strip().startswith("task.settings.")]
    if others or args.verifier:
        raise ConfigError(
            f"--task {does} the task's own grader; --verifier and --set choose a verifier instead "
            f"(beside --task, --set takes task.settings.KEY=VALUE)"
        )
    settings = {}
    for item in args.set or []:
        settings.update(parse_set(item)["task"]["settings"])
    try:
        return load_task(args.task, **settings)
    except ValueError as e:
        raise ConfigError(f"--task: {e}") from None


def task_scorer(args):
    """Rows graded exactly as the task grades them in training (--task NAME): its grader and answer form, the
    weighted reward of every term; the status is the correctness term's. Rows may carry `tests` and
    `entry_point` for code tasks, or what the task reads from a row (reasoning_gym: `entry`, the generator's item)."""
    from rlvr.config import reward_config
    from rlvr.tasks.rows import problem_from_row
    from rlvr.verifiers.compose import task_reward

    task = task_from_args(args, "grades with")
    section = reward_config({"workers": args.workers, "timeout_s": args.timeout_s})
    reward = task_reward(section, task)[1]  # as training grades: the task's grader, answer form and answer format

    def score(rows):
        problems = [problem_from_row(r, i, task) for i, r in enumerate(rows)]
        result = reward([r["completion"] for r in rows], problems)
        return list(zip(result.verdicts, result.total))

    return score


def run_verify(args) -> int:
    """Exit codes: 0 done, 2 bad arguments, input, or (with --on-bad-line fail) a malformed line."""
    try:
        score = task_scorer(args) if getattr(args, "task", None) else verifier_scorer(args)
    except ConfigError as e:
        print(f"rlvr verify: {e}", file=sys.stderr)
        return 2
    counts, bad, pending, code = Counter[str](), 0, [], 0
    try:
        with open(args.input, encoding="utf-8") as src, open(args.output, "w", encoding="utf-8") as out:
            for lineno, raw in enumerate(src, 1):
                if not raw.strip():
                    continue
                row, why = _read_line(raw, f"{args.input}:{lineno}")
                if why:
                    print(f"rlvr verify: {why}", file=sys.stderr)
                    bad += 1
                    if args.on_bad_line == "fail":
                        code = 2
                        break
                    continue
                pending.append(row)
                if len(pending) >= CHUNK:
                    counts += _flush(pending, score, out)
                    pending = []
            if pending:
                counts += _flush(pending, score, out)
    except OSError as e:
        print(f"rlvr verify: {e}", file=sys.stderr)
        return 2
    print(summary_table(counts, bad), file=sys.stderr)
    return code


def summary_table(counts: Counter, bad_lines: int = 0) -> str:
    total = sum(counts.values())
    lines = [f"{'status':<18} {'count':>7} {'frac':>7}"]
    for s in STATUSES:
        lines.append(f"{s:<18} {counts.get(s, 0):>7} {counts.get(s, 0) / max(total, 1):>7.1%}")
    lines.append(f"{'scored':<18} {total:>7}")
    lines.append(f"{'malformed lines':<18} {bad_lines:>7}")
    return "\n".join(lines)


def run_audit(args) -> int:
    """Exit codes: 0 no hack accepted, 1 some hack accepted, 2 bad arguments or no suite for the kind."""
    from rlvr.verifiers.audit import audit, format_report

    kind = args.verifier or "math"
    try:
        verifier = build_verifier(kind, parse_settings(args.set), "verifier")
    except ConfigError as e:
        print(f"rlvr audit: {e}", file=sys.stderr)
        return 2
    suite_of = KINDS.get(kind).audit  # the kind's entry says which cases attack it (Kind.audit)
    if suite_of is None:
        with_suites = [name for name in KINDS if KINDS.get(name).audit is not None]
        print(
            f"rlvr audit: no audit suite for verifier {kind!r}; choose from {', '.join(with_suites)}", file=sys.stderr
        )
        return 2
    suite = suite_of(verifier)
    # a verifier in a stricter answer form has its own equivalences (the math kind in the number form: math/number)
    label = f"{kind}/{suite.form}" if suite.form else kind
    report = audit(verifier, args.workers, args.timeout_s, suite.hacks, suite.equivalences)
    print(format_report(report, label, args.verbose))
    return 1 if report.hacks_accepted else 0
