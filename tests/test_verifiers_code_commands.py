import argparse
import json

from rlvr.cli import main
from rlvr.verifiers.code_commands import audit_code, verify_code


def test_verify_code_reads_lines_and_writes_verdicts(tmp_path):
    rows = [
        {"id": "a", "completion": "def f(x): return x + 1", "tests": ["assert f(1) == 2"]},
        {
            "id": "b",
            "completion": "def f(x): return x",
            "tests": "def check(c):\n    assert c(1) == 2\n",
            "entry_point": "f",
        },
        {"id": "c", "completion": "no code here at all", "tests": ["assert f(1) == 2"]},
    ]
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert (
        main(["verify", "--verifier", "python_tests", "--input", str(src), "--output", str(out), "--workers", "2"]) == 0
    )
    got = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(g["id"], g["status"], g["reward"], g["passed"], g["total"]) for g in got] == [
        ("a", "correct", 1.0, 1, 1),
        ("b", "wrong", 0.0, 0, 1),
        ("c", "no_answer", 0.0, 0, 0),
    ]


def test_verify_stdio_grades_by_output_not_as_python_tests(tmp_path):
    """--verifier stdio runs each case's stdin and compares the output (it was graded as python_tests, whose runner
    read the cases as test code: every line came out invalid_gold or an error)."""
    cases = [{"stdin": "2 3\n", "stdout": "5\n"}, {"stdin": "10 -4\n", "stdout": "6\n"}]
    rows = [
        {"id": "sum", "completion": "```python\nprint(sum(map(int, input().split())))\n```", "tests": cases},
        {
            "id": "product",
            "completion": "```python\na, b = map(int, input().split())\nprint(a * b)\n```",
            "tests": cases,
        },
    ]
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["verify", "--verifier", "stdio", "--input", str(src), "--output", str(out), "--workers", "1"]) == 0
    got = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(g["id"], g["status"], g["reward"], g["detail"]) for g in got] == [
        ("sum", "correct", 1.0, "2 cases"),
        ("product", "wrong", 0.0, "case 0: output differs (rc 0)"),
    ]


def test_verify_code_rejects_bad_input(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text("{not json\n")
    assert verify_code(argparse.Namespace(input=str(src), output=None, workers=1, timeout=2.0)) == 2


def test_audit_code_all_attacks_held(capsys):
    assert audit_code(argparse.Namespace(workers=4, timeout=2.5, output=None)) == 0
    assert "20/20 attacks held" in capsys.readouterr().out
