"""`rlvr verify --verifier python_tests | stdio` and `rlvr audit --verifier python_tests` (the CLI dispatches here).

Arguments read from the namespace (all optional): input (a JSONL path, "-" = stdin), output (a path;
stdout when absent), workers (parallel sandboxes, default 2), timeout (seconds per completion).
Input lines: {"completion": str, "tests": <check source | list of asserts | dict> (stdio: [{"stdin", "stdout"}, ...]),
"entry_point": str?, "id": any?}. Output lines: {"id", "status", "reward", "passed", "total", "fraction", "detail"}
(stdio: no passed / total / fraction: a line is correct only when every case is).
"""

from __future__ import annotations

import collections
import json
import sys
import tempfile
from typing import Any

from rlvr.tasks.base import Problem
from rlvr.verifiers.code import DEFAULT_LIMITS
from rlvr.verifiers.code_attacks import BAD_GOLDS, SOLVED_SQ, host_damage, hostile_suite


def _verifier(args, kind: str = "python_tests"):
    """The code verifier of `kind`, built from its registry entry (which turns the timeout into the sandbox's wall and
    CPU limits): python_tests' runner reports passed/total (the audit's hostile suite is written for it); stdio grades
    every case of a line's `tests` ([{"stdin", "stdout"}, ...]) by its output."""
    from rlvr.verifiers.registry import KINDS

    return KINDS.get(kind).factory(wall_s=float(getattr(args, "timeout", None) or DEFAULT_LIMITS.wall_s))


def _rows(path):
    stream = sys.stdin if path in (None, "-") else open(path)
    with stream:
        for n, line in enumerate(stream, 1):
            if line.strip():
                try:
                    yield n, json.loads(line)
                except ValueError as e:
                    yield n, {"_error": f"line {n}: not JSON: {e}"}


def verify_code(args) -> int:
    """Score every line; exit 0 when all were scored (whatever the verdicts), 2 on unreadable input."""
    from concurrent.futures import ThreadPoolExecutor

    verifier = _verifier(args, getattr(args, "verifier", None) or "python_tests")
    rows = list(_rows(getattr(args, "input", None)))
    bad = [row["_error"] for _, row in rows if "_error" in row or not isinstance(row.get("completion"), str)]
    if bad:
        print(f"verify: {bad[0] if isinstance(bad[0], str) else 'a line lacks a string completion'}", file=sys.stderr)
        return 2

    def one(item):
        n, row = item
        problem = Problem(
            str(row.get("id", n)), "", tests=row.get("tests"), meta={"entry_point": row.get("entry_point")}
        )
        if not hasattr(verifier, "run"):  # a verifier with no per-test counts (stdio: all cases or nothing)
            v = verifier.score(row["completion"], problem)
            return {"id": row.get("id", n), "status": v.status, "reward": v.reward, "detail": v.detail}
        out = verifier.run(row["completion"], problem)
        return {
            "id": row.get("id", n),
            "status": out.verdict.status,
            "reward": out.verdict.reward,
            "passed": out.passed,
            "total": out.total,
            "fraction": out.fraction,
            "detail": out.verdict.detail,
        }

    with ThreadPoolExecutor(max_workers=max(1, int(getattr(args, "workers", 2) or 2))) as pool:
        results = list(pool.map(one, rows))
    _write(getattr(args, "output", None), results)
    counts = collections.Counter(r["status"] for r in results)
    print(
        f"verify: {len(results)} scored; " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())), file=sys.stderr
    )
    return 0


def _write(path, results) -> None:
    text = "".join(json.dumps(r) + "\n" for r in results)
    if path in (None, "-"):
        sys.stdout.write(text)
    else:
        with open(path, "w") as f:
            f.write(text)


def audit_code(args) -> int:
    """Run the hostile suite; print one line per attack; exit 0 only when every attack scored 0 harmlessly."""
    from rlvr.verifiers.code import score_code_batch

    scratch = tempfile.TemporaryDirectory(prefix="rlvr-audit-")
    attacks, listener = hostile_suite(scratch.name)
    try:
        verdicts = score_code_batch(
            _verifier(args),
            [a.completion for a in attacks],
            [a.problem for a in attacks],
            workers=max(1, int(getattr(args, "workers", 2) or 2)),
        )
        results: list[dict[str, Any]] = [
            {
                "attack": a.name,
                "status": v.status,
                "reward": v.reward,
                "host_damage": host_damage(a, listener),
                "detail": v.detail,
            }
            for a, v in zip(attacks, verdicts)
        ]
    finally:
        listener.close()
        scratch.cleanup()
    held = [r["reward"] == 0.0 and not r["host_damage"] for r in results]
    for r, ok in zip(results, held):
        print(
            f"{'held ' if ok else 'BROKE'}  {r['attack']:<30} {r['status']:<8} reward={r['reward']}"
            + (f"  damage: {'; '.join(r['host_damage'])}" if r["host_damage"] else "")
        )
    print(f"audit python_tests: {sum(held)}/{len(held)} attacks held")
    refused = _audit_bad_golds(args)
    if getattr(args, "output", None):
        _write(args.output, results)
    return 0 if all(held) and refused else 1


def _audit_bad_golds(args) -> bool:
    """Tests that cannot fail must grade every completion invalid_gold; prints one line each and a count."""
    verifier = _verifier(args)
    ok = []
    for name, problem in BAD_GOLDS.items():
        v = verifier.score(SOLVED_SQ, problem)
        ok.append(v.status == "invalid_gold" and v.reward == 0.0)
        print(f"{'held ' if ok[-1] else 'BROKE'}  bad gold: {name:<30} {v.status:<12} reward={v.reward}")
    print(f"audit python_tests: {sum(ok)}/{len(ok)} golds that cannot fail refused (invalid_gold)")
    return all(ok)
