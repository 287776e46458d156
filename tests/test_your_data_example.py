"""docs/your-data.md's worked example (docs/examples/word_problems), run as the doc writes it on the embedded default
model, shrunk to two RL steps and a few held-out problems: the start model, the SFT model on the rows' worked
solutions and the RLVR model from it, evaluated on the held-out file and compared, as the doc's table reports them."""

import json
import re
import shlex
import shutil
from pathlib import Path

import pytest

from rlvr.cli import main

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "docs" / "examples" / "word_problems"
SMALL = [
    "rollout.prompts_per_step=2",
    "rollout.group_size=4",
    "rollout.max_new_tokens=32",
    "sft.max_examples=8",
    "sft.epochs=1",
    "eval.n=2",
    "eval.ks=[1, 2]",
    "eval.limit=6",
]


def _documented_commands() -> list[str]:
    """The `sh` block of the doc's worked example: `cd` into the example, then `rlvr run` on its config."""
    text = (ROOT / "docs" / "your-data.md").read_text()
    section = text[text.index("## A worked example that learns") :]
    return re.search(r"```sh\n(.*?)```", section, re.S).group(1).strip().splitlines()


def test_the_example_files_are_what_make_py_writes(tmp_path):
    """The committed data are make.py's output (deterministic), each training row with a worked solution whose last
    number is its gold answer."""
    import runpy

    runpy.run_path(str(EXAMPLE / "make.py"), run_name="make")["main"]([str(tmp_path)])
    for name in ("train.jsonl", "heldout.jsonl"):
        assert (tmp_path / name).read_text() == (EXAMPLE / name).read_text(), name
    rows = [json.loads(x) for x in (EXAMPLE / "train.jsonl").read_text().splitlines()]
    assert len(rows) == 90 and all(r["trace"].endswith(f"\\boxed{{{r['answer']}}}.") for r in rows)
    assert all("trace" not in json.loads(x) for x in (EXAMPLE / "heldout.jsonl").read_text().splitlines())


@pytest.mark.slow
def test_the_worked_example_runs_as_documented(tmp_path, monkeypatch):
    folder = tmp_path / "word_problems"
    shutil.copytree(EXAMPLE, folder)
    cd, run = _documented_commands()
    assert cd == "cd docs/examples/word_problems"
    monkeypatch.chdir(folder)
    args = shlex.split(run)
    assert args[:3] == ["rlvr", "run", "word_problems.yaml"]
    assert main([*args[1:], "--steps", "2", *sum((["--set", s] for s in SMALL), [])]) == 0
    out = folder / "runs" / "word-problems"
    compare = json.loads((out / "compare.json").read_text())
    assert compare["models"] == ["start", "sft", "rlvr"] and compare["bands"][-1] == "all"
    sft = json.loads((out / "sft" / "sft_data.json").read_text())
    assert sft["source"] == "reference" and sft["examples"] == 8, sft  # the rows' worked solutions, max_examples
    rows = [json.loads(x) for x in (out / "rlvr" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1]
    assert "- **steps trained**: 2" in (out / "report.md").read_text()
