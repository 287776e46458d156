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
            "no gold answer (give one of the columns answer, gold, solution, ground_truth, final_answer) and no tests",
        ),
        ({"prompt": "   ", "answer": "4"}, "empty prompt"),
        (
            {"prompt": "What is 2+2?", "answer": ""},
            "no gold answer (give one of the columns answer, gold, solution, ground_truth, final_answer) and no tests",
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
    task = load_task("jsonl", path=str(write(tmp_path / "d.jsonl", rows)), demo="none")  # every row in its split
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
    task = load_task("jsonl", splits={"train": str(write(tmp_path / "d.jsonl", rows))}, demo="none")
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
    train = {"train": str(write(tmp_path / "d.jsonl", rows))}
    task = load_task("jsonl", splits=train, system_prompt="SYS", demo="none")  # the demo: tests/test_tasks_demo.py
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


# Issue 51: a TRL user's first hour. Each mistake is one line through the CLI, exit 2, before a model is loaded.
TOOL_CHAT = [  # TRL's conversational form with a tool-call demonstration (TRL docs, "Tool Calling")
    {"role": "system", "content": "Use the tools."},
    {"role": "user", "content": "Turn on the living room lights."},
    {
        "role": "assistant",
        "tool_calls": [
            {"type": "function", "function": {"name": "control_light", "arguments": {"room": "living room"}}}
        ],
    },
    {"role": "tool", "name": "control_light", "content": "The lights are on."},
    {"role": "assistant", "content": "Done!"},
    {"role": "user", "content": "What is 6 * 7?"},
]


def _cli_error(tmp_path, capsys, monkeypatch, settings: str) -> tuple[int, str]:
    from rlvr.cli import main

    def no_model(*a, **k):  # data the checks let through must not start a real run in a test
        raise AssertionError("the data was accepted: a model is being loaded")

    monkeypatch.setattr("rlvr.training.step.build_policy", no_model)

    code = main(
        [
            "train",
            "--set",
            "task.name=jsonl",
            "--set",
            f"task.settings={settings}",
            "--output-dir",
            str(tmp_path / "run"),
        ]
    )
    assert not (tmp_path / "run").exists()
    return code, capsys.readouterr().err.strip()


def _bad_file(tmp_path, rows) -> str:
    return str(write(tmp_path / "d.jsonl", rows))


@pytest.mark.parametrize(
    "rows, settings, message",
    [
        (  # a split name that is not one: the train split would be empty (was: ValueError traceback, exit 1)
            [{"prompt": "1+1?", "answer": "2"}],
            "{{splits: {{training: {path}}}}}",
            "task.settings.splits.training: not a split; choose from train, validation, heldout",
        ),
        (  # a gold the answer form refuses (was: accepted, and every reply graded against 'about 40')
            [{"prompt": "1+1?", "answer": "2"}, {"prompt": "How many?", "answer": "about 40"}],
            "{{path: {path}, answer_form: number}}",
            "{path}:2: gold 'about 40' under answer_form number: 'about 40' is an expression to evaluate, not a "
            "number; number takes a numeral (a fraction in lowest terms where the gold is one); no expressions "
            "(fix the gold, or set task.settings.answer_form: math)",
        ),
        (  # two rows with one id (was: accepted; records and splits are keyed by id)
            [
                {"id": "q1", "prompt": "1+1?", "answer": "2"},
                {"id": "q2", "prompt": "2+2?", "answer": "4"},
                {"id": "q1", "prompt": "3+3?", "answer": "6"},
            ],
            "{{path: {path}}}",
            "{path}: lines 1 and 3 have the same id 'q1'; ids must be unique (an id decides the problem's split "
            "and names it in the records)",
        ),
        (  # two rows without ids asking the same question: the same id from the question's hash
            [{"prompt": "1+1?", "answer": "2"}, {"prompt": "1+1?", "answer": "2"}],
            "{{path: {path}}}",
            "{path}: lines 1 and 2 ask the same question and have no id (a row without one is named by its "
            "question); give each an id, or drop the repeat",
        ),
        (  # a held-out file alone: nothing to train on (was: ValueError traceback from the prompt stream, exit 1)
            [{"prompt": "1+1?", "answer": "2"}],
            "{{splits: {{heldout: {path}}}}}",
            "task 'jsonl' has no train problems; training needs a train split (jsonl: task.settings.splits.train, "
            "or task.settings.path to cut one file by id)",
        ),
        (  # an `input` column (was: "empty prompt"); `question` is read (GSM8K's, DeepMath's)
            [{"input": "1+1?", "answer": "2"}],
            "{{path: {path}}}",
            "{path}:1: no prompt column (give `prompt` or `problem` or `question`: the question as text, or chat "
            "messages; or name the column with task.settings.prompt_field); the row's columns: input, answer",
        ),
        (  # a truncated line (was: "not valid JSON (Unterminated string starting at)", the position cut off)
            [{"prompt": "1+1?", "answer": "2"}, '{"prompt": "What is 2+'],
            "{{path: {path}}}",
            "{path}:2: not valid JSON: Unterminated string starting at: line 1 column 12 (char 11)",
        ),
    ],
)
def test_data_mistakes_are_one_line_exit_2(tmp_path, capsys, monkeypatch, rows, settings, message):
    path = _bad_file(tmp_path, rows)
    code, err = _cli_error(tmp_path, capsys, monkeypatch, settings.format(path=path))
    assert code == 2 and err == "rlvr train: " + message.format(path=path)


def test_a_gold_in_its_answer_form_loads(tmp_path):
    rows = [
        {"prompt": "1+1?", "answer": "2"},
        {"prompt": "half?", "answer": "1/2"},
        {"prompt": "$?", "answer": "$1,200"},
    ]
    task = load_task("jsonl", splits={"train": _bad_file(tmp_path, rows)}, answer_form="number", demo="none")
    assert [p.answer for p in task.problems("train")] == ["2", "1/2", "$1,200"]
    math = load_task("jsonl", splits={"train": _bad_file(tmp_path, rows + [{"prompt": "?", "answer": "about 40"}])})
    assert math.answer_form == "math"  # auto: one gold is not a number, so the math form, and no refusal


def test_trl_tool_call_demonstration_is_kept(tmp_path):
    rows = [{"id": "t", "prompt": TOOL_CHAT, "answer": "42"}]
    task = load_task("jsonl", splits={"train": _bad_file(tmp_path, rows)})  # a system_prompt: refused, see below
    (p,) = task.problems("train")
    assert p.prompt == "What is 6 * 7?"
    assert task.messages(p) == [
        TOOL_CHAT[0],
        TOOL_CHAT[1],
        {"role": "assistant", "content": "", "tool_calls": TOOL_CHAT[2]["tool_calls"]},
        TOOL_CHAT[3],
        TOOL_CHAT[4],
        TOOL_CHAT[5],
    ]


def test_datasets_nulls_and_openai_string_arguments_are_read(tmp_path):
    """A file written by datasets' to_json has every key on every message (null where absent), and OpenAI's form
    writes arguments as a JSON string: both read as TRL's form."""
    chat = [
        {"role": "user", "content": "Lights?", "tool_calls": None, "name": None},
        {
            "role": "assistant",
            "content": None,
            "name": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "light", "arguments": '{"on": true}'}}
            ],
        },
        {"role": "tool", "content": "on", "tool_calls": None, "name": "light"},
        {"role": "assistant", "content": "It is on.", "tool_calls": [], "name": None},
        {"role": "user", "content": "2+2?", "tool_calls": None, "name": None},
    ]
    task = load_task("jsonl", splits={"train": _bad_file(tmp_path, [{"prompt": chat, "answer": "4"}])})
    assert task.messages(task.problems("train")[0])[1:] == [
        {"role": "user", "content": "Lights?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "light", "arguments": {"on": True}}}],
        },
        {"role": "tool", "content": "on", "name": "light"},
        {"role": "assistant", "content": "It is on."},
        {"role": "user", "content": "2+2?"},
    ]


def test_tool_calls_render_as_text_where_the_template_ignores_them(tmp_path, tokenizer):
    """SmolLM2's template reads only role and content: the call would vanish from the prompt, so it is written in
    the assistant turn as the Hermes call the tool episodes parse; the tool's reply is its own turn."""
    from rlvr.prompts.chat import encode_prompt

    task = load_task("jsonl", splits={"train": _bad_file(tmp_path, [{"prompt": TOOL_CHAT, "answer": "42"}])})
    text = tokenizer.decode(encode_prompt(tokenizer, task.messages(task.problems("train")[0])))
    assert (
        "<|im_start|>assistant\n<tool_call>\n"
        '{"name": "control_light", "arguments": {"room": "living room"}}\n</tool_call><|im_end|>\n'
        "<|im_start|>tool\nThe lights are on.<|im_end|>\n<|im_start|>assistant\nDone!<|im_end|>\n"
    ) in text
    assert text.endswith("<|im_start|>user\nWhat is 6 * 7?<|im_end|>\n<|im_start|>assistant\n")
    from rlvr.environments.episode import template_kwargs  # an episode's opening (tool-use runs) renders the same

    opening, _ = template_kwargs(tokenizer, task.messages(task.problems("train")[0]), {})
    assert tokenizer.apply_chat_template(opening, tokenize=False, add_generation_prompt=True) == text


def test_tool_calls_pass_through_a_template_that_renders_them():
    from rlvr.tasks.chat import for_template

    class Shows:  # a template that renders every key of every message (as Qwen2.5's renders tool_calls)
        def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True):
            return json.dumps(messages)

    messages = [dict(m) for m in TOOL_CHAT]
    messages[2]["content"] = ""
    assert for_template(Shows(), messages) is messages


@pytest.mark.parametrize(
    "message, why",
    [
        (
            {"role": "assistant", "tool_calls": [{"type": "function", "function": {"arguments": {}}}]},
            "prompt message 1: tool_calls[0] must be {type: function, function: {name: text, arguments: object}}",
        ),
        (
            {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "[1"}}]},
            "prompt message 1: tool_calls[0] must be {type: function, function: {name: text, arguments: object}}",
        ),
        ({"role": "tool"}, "prompt message 1 must be {role: system | user | assistant | tool, content: text}"),
        (
            {"role": "robot", "content": "x"},
            "prompt message 1 must be {role: system | user | assistant | tool, content: text}",
        ),
    ],
)
def test_bad_tool_message_names_file_line_and_the_form(tmp_path, message, why):
    chat = [{"role": "user", "content": "a?"}, message, {"role": "user", "content": "b?"}]
    path = _bad_file(tmp_path, [{"prompt": chat, "answer": "1"}])
    with pytest.raises(DatasetError) as e:
        load_task("jsonl", path=path)
    assert str(e.value) == f"{path}:1: {why}"


# Issue 72: data sets as people hold them, with no column setting.
GSM8K = {
    "question": "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How "
    "many clips did Natalia sell altogether in April and May?",
    "answer": "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\nNatalia sold 48+24 = <<48+24=72>>72 clips altogether "
    "in April and May.\n#### 72",
}
DEEPMATH = {
    "question": "Evaluate the limit of x * sin(1/x) as x goes to 0.",
    "final_answer": "0",
    "difficulty": 4.5,
    "topic": "Mathematics -> Calculus",
    "r1_solution_1": "<think>squeeze</think> The limit is \\boxed{0}.",
}


def test_gsm8k_rows_are_the_final_answer_with_the_work_as_the_trace(tmp_path):
    path = tmp_path / "gsm8k.jsonl"
    path.write_text("".join(json.dumps({**GSM8K, "question": GSM8K["question"] + f" ({i})"}) + "\n" for i in range(30)))
    task = load_task("jsonl", path=str(path), demo="none")
    p = next(q for s in ("train", "validation", "heldout") for q in task.problems(s))
    assert p.answer == "72" and p.band == "all" and task.answer_form == "number"  # `#### 72` is a numeral gold
    work = "Natalia sold 48/2 = 24 clips in May.\nNatalia sold 48+24 = 72 clips altogether in April and May."
    assert p.meta["reasoning"] == work  # GSM8K's calculator notes are its tooling, not a solution to imitate
    assert p.meta["trace"] == work + "\n\\boxed{72}"  # what `rlvr sft --set sft.source=reference` trains on
    auto = load_task("jsonl", path=str(path))  # a demonstration shows work when the gold has work
    assert auto.demo[1]["content"].endswith("\\boxed{72}") and "48/2 = 24" in auto.demo[1]["content"]


def test_deepmath_rows_read_question_final_answer_and_difficulty(tmp_path):
    path = tmp_path / "deepmath.jsonl"
    path.write_text(
        "".join(json.dumps({**DEEPMATH, "question": DEEPMATH["question"] + f" ({i})"}) + "\n" for i in range(20))
    )
    task = load_task("jsonl", path=str(path), demo="none")
    p = next(q for s in ("train", "validation", "heldout") for q in task.problems(s))
    assert p.answer == "0" and p.band == "difficulty 4-6" and "reasoning" not in p.meta


def test_column_names_are_settings(tmp_path):
    path = tmp_path / "own.jsonl"
    path.write_text("".join(json.dumps({"q": f"{i} + 1?", "a": str(i + 1), "lvl": "easy"}) + "\n" for i in range(20)))
    task = load_task("jsonl", path=str(path), prompt_field="q", answer_field="a", band_field="lvl", demo="none")
    p = task.problems("train")[0]
    assert p.prompt.endswith("+ 1?") and p.answer == str(int(p.prompt.split()[0]) + 1) and p.band == "easy"
    with pytest.raises(DatasetError, match="no column 'question'"):
        load_task("jsonl", path=str(path), prompt_field="question")


def test_rlvr_verify_reads_a_worked_gold_as_its_final_answer(tmp_path):
    from rlvr.cli import main

    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text(json.dumps({"completion": "So \\boxed{72}.", "answer": GSM8K["answer"]}) + "\n")
    assert main(["verify", "--input", str(src), "--output", str(out)]) == 0
    assert json.loads(out.read_text())["status"] == "correct"


def test_rlvr_eval_refuses_the_data_before_any_model_loads(tmp_path, capsys, monkeypatch):
    from rlvr.cli import main

    def no_model(*a, **k):
        raise AssertionError("a model was loaded before the data was checked")

    monkeypatch.setattr("rlvr.policy.load.load_policy", no_model)
    monkeypatch.setattr("rlvr.evaluation.models.adapter_policy", no_model)
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"input": "1+1?", "answer": "2"}) + "\n")
    argv = ["eval", "--model", "smollm2-135m-instruct", "--task", "jsonl", "--set", f"task.settings.path={path}"]
    assert main(argv + ["--out", str(tmp_path / "out")]) == 2
    assert "no prompt column" in capsys.readouterr().err and not (tmp_path / "out").exists()


@pytest.mark.parametrize("shape", ["gsm8k", "deepmath"])
def test_gsm8k_and_deepmath_files_train_and_evaluate_with_no_column_setting(tmp_path, tokenizer, shape):
    from conftest import make_tiny_llama
    from rlvr.cli import main
    from rlvr.training.loop import train
    from test_trainer import tiny_config

    row = GSM8K if shape == "gsm8k" else DEEPMATH
    path = tmp_path / f"{shape}.jsonl"
    path.write_text("".join(json.dumps({**row, "question": row["question"] + f" ({i})"}) + "\n" for i in range(40)))
    # the task's own grader (math-verify in the number form) against the final answers: the regex terms reset
    cfg = tiny_config(tmp_path, **{"task.settings": f"{{path: {path}, demo: none}}", "reward.terms": "[]"})
    cfg["train"]["steps"] = 1
    run = train(cfg, policy=(make_tiny_llama(len(tokenizer)), tokenizer), quiet=True)
    samples = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    assert samples and {s["gold"] for s in samples} == {"72" if shape == "gsm8k" else "0"}  # the final answer
    argv = ["eval", "--model", str(run), "--n", "1", "--limit", "2", "--max-new-tokens", "4", "--no-greedy", "--quiet"]
    assert main(argv) == 0
    summary = json.loads((run / "eval" / "heldout" / "summary.json").read_text())
    assert summary["overall"]["n_problems"] == 2 and summary["setup"]["task"] == "jsonl"
