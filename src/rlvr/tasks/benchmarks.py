"""Public out-of-domain benchmarks, loaded as Problems labelled meta["domain"] = "out-of-domain".

- MATH-500 by hub id (online: needs `pip install datasets`), or the same rows from a local .jsonl /
  .json / .parquet file; band = "level1".."level5", as the benchmark grades difficulty.
- CHAMP (competition problems, MIT licence) from the `champ-dataset` PyPI package, which works
  offline. Only its problems whose gold is a plain number or fraction are kept by default: the rest
  have free-text golds ("It is not possible", "x = +-1, +-2") that no answer verifier can grade fairly.
  band = the problem's category (CHAMP has no difficulty levels).

A bad row is a DatasetError naming the file and line (or row for parquet and the hub).
"""

from __future__ import annotations

import importlib.util
import json
import re
from collections.abc import Iterator
from pathlib import Path

from rlvr.tasks.base import DatasetError, Problem, validate_problem

OUT_OF_DOMAIN = "out-of-domain"
MATH500_HUB_ID = "HuggingFaceH4/MATH-500"
LOCAL_SUFFIXES = (".jsonl", ".json", ".parquet")
_PLAIN_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:/\d+)?")


def read_rows(path: str | Path) -> Iterator[tuple[str, dict]]:
    """(where, row) for each row of a local file; where is "FILE:LINE" (jsonl) or "FILE:row N"."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"{path}: no such file")
    if path.suffix == ".jsonl":
        with open(path, encoding="utf-8") as f:
            for line_no, line in enumerate(f, start=1):
                if line.strip():
                    yield f"{path}:{line_no}", _json_object(line, f"{path}:{line_no}")
    elif path.suffix == ".json":
        rows = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(rows, list):
            raise DatasetError(f"{path}: expected a JSON list of rows, got {type(rows).__name__}")
        yield from ((f"{path}:row {i}", r) for i, r in enumerate(rows, start=1))
    elif path.suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise DatasetError(f"{path}: reading parquet needs pyarrow (pip install pyarrow)") from None
        yield from ((f"{path}:row {i}", r) for i, r in enumerate(pq.read_table(path).to_pylist(), start=1))
    else:
        raise DatasetError(f"{path}: unknown file type; use one of {', '.join(LOCAL_SUFFIXES)}")


def _json_object(line: str, where: str) -> dict:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as e:
        raise DatasetError(f"{where}: not valid JSON ({e.msg})") from None
    return row


def _field(row, key: str, where: str) -> str:
    if not isinstance(row, dict):
        raise DatasetError(f"{where}: expected an object with fields, got {type(row).__name__}")
    value = row.get(key)
    if value is None or str(value).strip() == "":
        raise DatasetError(f"{where}: missing or empty field {key!r}")
    return str(value)


def math500_problem(row: dict, where: str, index: int) -> Problem:
    """One MATH-500 row {problem, answer, level?, subject?, unique_id?} -> Problem."""
    prompt, answer = _field(row, "problem", where), _field(row, "answer", where)
    level = row.get("level")
    problem = Problem(
        id=f"math500/{row.get('unique_id') or index}",
        prompt=prompt,
        answer=answer.strip(),
        band=f"level{level}" if level not in (None, "") else "all",
        meta={"domain": OUT_OF_DOMAIN, "benchmark": "MATH-500", "subject": row.get("subject")},
    )
    return validate_problem(problem, where, index)


def _hub_rows(hub_id: str, split: str) -> Iterator[tuple[str, dict]]:
    try:
        import datasets
    except ImportError:
        raise DatasetError(
            f"{hub_id}: loading from the hub needs `pip install datasets` (and the internet); "
            f"offline, pass a local .jsonl or .parquet file of the same rows"
        ) from None
    rows = datasets.load_dataset(hub_id, split=split)
    yield from ((f"{hub_id}[{split}] row {i}", r) for i, r in enumerate(rows, start=1))


def is_local(source: str | Path) -> bool:
    return Path(source).exists() or str(source).endswith(LOCAL_SUFFIXES)


def load_math500(source: str | Path = MATH500_HUB_ID, split: str = "test", limit: int | None = None) -> list[Problem]:
    """MATH-500 from a local file (jsonl / json / parquet) or, when source is not a path, the hub."""
    rows = read_rows(source) if is_local(source) else _hub_rows(str(source), split)
    problems: list[Problem] = []
    for index, (where, row) in enumerate(rows, start=1):
        if limit is not None and len(problems) >= limit:
            break
        problems.append(math500_problem(row, where, index))
    _check_unique(problems, str(source))
    return problems


def champ_file() -> Path:
    """Where the installed champ-dataset package keeps its data, found without importing it (its
    __init__ pulls in natsort, which only its own helpers need)."""
    spec = importlib.util.find_spec("champ_dataset")
    if spec is None or not spec.submodule_search_locations:
        raise DatasetError("the CHAMP benchmark needs the champ-dataset package (pip install champ-dataset)")
    return Path(list(spec.submodule_search_locations)[0]) / "dataset_files" / "v0.json"


def load_champ(numeric_only: bool = True, path: str | Path | None = None) -> list[Problem]:
    """CHAMP's problems as Problems (band = category). numeric_only keeps golds like '239' or '2/3'."""
    path = Path(path) if path else champ_file()
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))["problems"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise DatasetError(f"{path}: not a CHAMP data file ({type(e).__name__}: {e})") from None
    problems = []
    for index, (key, row) in enumerate(rows.items(), start=1):
        where = f"{path}: problem {key}"
        answer = _field(row, "_answer", where).strip()
        if numeric_only and not _PLAIN_NUMBER.fullmatch(answer):
            continue
        problems.append(
            validate_problem(
                Problem(
                    id=f"champ/{key}",
                    prompt=_field(row, "_text", where),
                    answer=answer,
                    band=str(row.get("category") or "all"),
                    meta={"domain": OUT_OF_DOMAIN, "benchmark": "CHAMP"},
                ),
                where,
                index,
            )
        )
    return problems


def _check_unique(problems: list[Problem], source: str) -> None:
    seen = set()
    for p in problems:
        if p.id in seen:
            raise DatasetError(f"{source}: problem id {p.id!r} appears twice")
        seen.add(p.id)
