"""A local JSON-lines dataset: bad rows are named by file and line; nothing is written."""

import json

import pytest

from rlvr.tasks import DatasetError, load_task


def write(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


@pytest.mark.parametrize(
    "bad, why",
    [
        (
            {"prompt": "What is 2+2?"},
            "no gold answer (give one of the columns answer, gold, solution, ground_truth) and no tests",
        ),
        ({"prompt": "   ", "answer": "4"}, "empty prompt"),
        (
            {"prompt": "What is 2+2?", "answer": ""},
            "no gold answer (give one of the columns answer, gold, solution, ground_truth) and no tests",
        ),
        ("{not json", "not valid JSON"),
        ("[1, 2]", "expected a JSON object"),
    ],
)
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
    code = main(
        ["train", "--set", "task.name=jsonl", "--set", f"task.settings={{path: {path}}}", "--output-dir", str(out)]
    )
    assert code == 2 and f"{path}:2" in capsys.readouterr().err
    assert not out.exists()


def test_gold_column_rule_first_present_wins(tmp_path):
    rows = [
        {"id": "a", "prompt": "p1?", "ground_truth": "1"},
        {"id": "b", "prompt": "p2?", "solution": "2"},
        {"id": "c", "prompt": "p3?", "gold": "3", "solution": "worked: 3"},
        {"id": "d", "prompt": "p4?", "answer": None, "gold": "4"},
    ]
    task = load_task("jsonl", splits={"train": str(write(tmp_path / "d.jsonl", rows))})
    got = {p.id: p.answer for p in task.problems("train")}
    assert got == {"a": "1", "b": "2", "c": "3", "d": "4"}
    c = next(p for p in task.problems("train") if p.id == "c")
    assert c.meta["solution"] == "worked: 3" and "gold" not in c.meta  # the unused column stays readable (sft traces)


def test_chat_prompts_keep_their_system_turn(tmp_path):
    chat = [
        {"role": "system", "content": "Answer in French."},
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": r"\boxed{4}"},
        {"role": "user", "content": "3+3?"},
    ]
    rows = [
        {"id": "own", "prompt": chat, "answer": "6"},
        {"id": "nosys", "prompt": [{"role": "user", "content": "1+1?"}], "answer": "2"},
        {"id": "text", "prompt": "5+5?", "answer": "10"},
    ]
    task = load_task("jsonl", splits={"train": str(write(tmp_path / "d.jsonl", rows))}, system_prompt="SYS")
    by_id = {p.id: p for p in task.problems("train")}
    assert by_id["own"].prompt == "3+3?" and task.messages(by_id["own"]) == chat
    assert task.messages(by_id["nosys"]) == [{"role": "system", "content": "SYS"}, {"role": "user", "content": "1+1?"}]
    assert task.messages(by_id["text"]) == [{"role": "system", "content": "SYS"}, {"role": "user", "content": "5+5?"}]


@pytest.mark.parametrize(
    "prompt, why",
    [
        ([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "x"}], "must end with a user turn"),
        ([{"role": "robot", "content": "hi"}], "prompt message 0 must be"),
        ([{"role": "user"}], "prompt message 0 must be"),
    ],
)
def test_bad_chat_prompt_names_file_and_line(tmp_path, prompt, why):
    path = write(tmp_path / "d.jsonl", [{"prompt": "ok?", "answer": "1"}, {"prompt": prompt, "answer": "1"}])
    with pytest.raises(DatasetError) as e:
        load_task("jsonl", path=str(path))
    assert f"{path}:2" in str(e.value) and why in str(e.value)
