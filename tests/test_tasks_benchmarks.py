"""Out-of-domain benchmark loaders: MATH-500 rows from a local file, CHAMP from its PyPI package."""

import importlib.util
import json

import pytest

from rlvr.tasks import load_task
from rlvr.tasks.base import DatasetError
from rlvr.tasks.benchmarks import OUT_OF_DOMAIN, load_champ, load_math500
from rlvr.tasks.hygiene import find_leaks

ROWS = [
    {
        "problem": "What is $1+1$?",
        "answer": "2",
        "level": 1,
        "subject": "Algebra",
        "unique_id": "test/algebra/1.json",
        "solution": "...",
    },
    {
        "problem": "Compute $\\binom{5}{2}$.",
        "answer": " 10 ",
        "level": 2,
        "subject": "Counting",
        "unique_id": "test/counting/7.json",
    },
    {"problem": "Simplify $\\frac{2}{4}$.", "answer": "\\frac{1}{2}", "level": 1},
]


def write_jsonl(path, rows, extra_lines=()):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + "".join(extra_lines))
    return path


def test_math500_from_local_jsonl(tmp_path):
    problems = load_math500(write_jsonl(tmp_path / "math500.jsonl", ROWS))
    assert [p.id for p in problems] == ["math500/test/algebra/1.json", "math500/test/counting/7.json", "math500/3"]
    assert [p.band for p in problems] == ["level1", "level2", "level1"]
    assert problems[1].answer == "10" and problems[2].answer == "\\frac{1}{2}"
    assert all(p.meta["domain"] == OUT_OF_DOMAIN and p.meta["benchmark"] == "MATH-500" for p in problems)
    assert len(load_math500(tmp_path / "math500.jsonl", limit=2)) == 2


def test_math500_from_local_json_list_and_by_path(tmp_path):
    path = tmp_path / "m.json"
    path.write_text(json.dumps(ROWS))
    assert [p.answer for p in load_task("math500", source=str(path)).problems("heldout")] == ["2", "10", "\\frac{1}{2}"]


@pytest.mark.parametrize(
    "extra, match",
    [
        ("{not json\n", r"bad.jsonl:4: not valid JSON"),
        (json.dumps({"problem": "What?"}) + "\n", r"bad.jsonl:4: missing or empty field 'answer'"),
        (json.dumps({"problem": "  ", "answer": "1"}) + "\n", r"bad.jsonl:4: missing or empty field 'problem'"),
        (json.dumps([1, 2]) + "\n", r"bad.jsonl:4: expected an object"),
        (json.dumps(ROWS[0]) + "\n", r"appears twice"),
    ],
)
def test_bad_row_is_named_by_file_and_line(tmp_path, extra, match):
    path = write_jsonl(tmp_path / "bad.jsonl", ROWS, [extra])
    with pytest.raises(DatasetError, match=match):
        load_math500(path)


def test_missing_file_and_unknown_benchmark(tmp_path):
    with pytest.raises(DatasetError, match="no such file"):
        load_math500(tmp_path / "absent.jsonl")
    with pytest.raises(ValueError, match="unknown task 'gsm9k'; choose from .*math500.*champ"):
        load_task("gsm9k")


@pytest.mark.skipif(importlib.util.find_spec("pyarrow") is not None, reason="pyarrow is installed")
def test_parquet_without_pyarrow_says_what_to_install(tmp_path):
    (tmp_path / "m.parquet").write_bytes(b"PAR1")
    with pytest.raises(DatasetError, match="pip install pyarrow"):
        load_math500(tmp_path / "m.parquet")


@pytest.mark.skipif(importlib.util.find_spec("datasets") is not None, reason="datasets is installed")
def test_hub_without_datasets_says_what_to_do():
    with pytest.raises(DatasetError, match="pip install datasets"):
        load_math500("HuggingFaceH4/MATH-500")


@pytest.mark.skipif(importlib.util.find_spec("champ_dataset") is None, reason="champ-dataset not installed")
def test_champ_ships_offline_numeric_subset():
    problems = load_champ()
    assert len(problems) == 85
    assert problems[0].id == "champ/P_Combinatorics_1" and problems[0].answer == "239"
    assert {p.band for p in problems} == {"Combinatorics", "Number-Theory", "Inequality", "Polynomial", "Sequence"}
    assert all(p.meta["domain"] == OUT_OF_DOMAIN for p in problems)
    assert len({p.id for p in problems}) == 85
    assert len(load_champ(numeric_only=False)) == 270
    # A report, not a filter: print which gold answers also appear in their prompt.
    for leak in find_leaks(problems):
        print("possible leak:", leak)


def test_champ_bad_file_is_named(tmp_path):
    path = tmp_path / "v0.json"
    path.write_text(json.dumps({"problems": {"P_1": {"_text": "Find x.", "_answer": ""}}}))
    with pytest.raises(DatasetError, match="problem P_1: missing or empty field '_answer'"):
        load_champ(path=path)
    path.write_text("[]")
    with pytest.raises(DatasetError, match="not a CHAMP data file"):
        load_champ(path=path)
