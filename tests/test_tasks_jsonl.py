"""A local JSON-lines dataset: bad rows are named by file and line; nothing is written."""

import json

import pytest

from rlvr.tasks import DatasetError, load_task


def write(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


@pytest.mark.parametrize("bad, why", [
    ({"prompt": "What is 2+2?"}, "no answer and no tests"),
    ({"prompt": "   ", "answer": "4"}, "empty prompt"),
    ({"prompt": "What is 2+2?", "answer": ""}, "no answer and no tests"),
    ("{not json", "not valid JSON"),
    ("[1, 2]", "expected a JSON object"),
])
def test_bad_row_names_file_and_line(tmp_path, bad, why):
    path = write(tmp_path / "data.jsonl", [{"prompt": "What is 1+1?", "answer": "2"}, bad])
    with pytest.raises(DatasetError) as e:
        load_task("jsonl", path=str(path))
    assert f"{path}:2" in str(e.value) and why in str(e.value)


def test_good_file_splits_by_id(tmp_path):
    rows = [{"id": f"q{i}", "prompt": f"What is {i}+1?", "answer": str(i + 1), "band": "easy"} for i in range(200)]
    task = load_task("jsonl", path=str(write(tmp_path / "d.jsonl", rows)))
    sizes = {s: len(task.problems(s)) for s in ("train", "validation", "heldout")}
    assert sum(sizes.values()) == 200 and sizes["train"] > 140
    assert task.bands == ["easy"]
    p = task.problems("heldout")[0]
    assert p.answer == str(int(p.prompt.split()[2].split("+")[0]) + 1)


def test_cli_rejects_bad_dataset_without_writing(tmp_path, capsys):
    from rlvr.cli import main

    path = write(tmp_path / "d.jsonl", [{"prompt": "ok?", "answer": "1"}, {"prompt": "", "answer": "1"}])
    out = tmp_path / "run"
    code = main(["train", "--set", "task.name=jsonl", "--set", f"task.settings={{path: {path}}}",
                 "--output-dir", str(out)])
    assert code == 2 and f"{path}:2" in capsys.readouterr().err
    assert not out.exists()
