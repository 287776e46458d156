"""task.settings.demo: the solved exchange shown before each question (auto, none, or the user's own), its
question left out of training, its mistakes one line naming the setting, and the prompt a run records and
`rlvr eval` of the run uses."""

import json

import pytest
import yaml

from rlvr.errors import ConfigError
from rlvr.tasks import load_task

SYSTEM = {"role": "system", "content": "Solve the problem step by step. Put your final answer inside \\boxed{}."}
ROWS = [  # bands named so that sorting them as text would put the hardest first ("10-step" < "2-step")
    {"id": "b", "prompt": "Ann has 3 cups and buys 4 more. How many cups?", "answer": "7", "band": "2-step"},
    {"id": "a", "prompt": "A bag holds 5 pens and 2 more are added. How many pens?", "answer": "7", "band": "2-step"},
    {
        "id": "0",
        "prompt": "Tom saves 2 a day for 5 days, spends 3, then earns 4. How much?",
        "answer": "11",
        "band": "10-step",
    },
    {"id": "c", "prompt": [{"role": "user", "content": "What is 1 + 1?"}], "answer": "2", "band": "1-step"},
]
HELDOUT = [{"id": "h1", "prompt": "Ben has 6 cards and gets 3 more. How many cards?", "answer": "9", "band": "2-step"}]


def write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def splits(tmp_path, train=ROWS, heldout=HELDOUT):
    return {"train": write(tmp_path / "train.jsonl", train), "heldout": write(tmp_path / "heldout.jsonl", heldout)}


def test_auto_shows_the_easiest_bands_first_problem_by_id_and_leaves_it_out_of_training(tmp_path):
    task = load_task("jsonl", splits=splits(tmp_path))  # demo: auto is the default
    # 1-step's only problem is a chat prompt (used as written, nothing to show); 2-step before 10-step; "a" before "b"
    demo = [
        {"role": "user", "content": "A bag holds 5 pens and 2 more are added. How many pens?"},
        {"role": "assistant", "content": "The answer is \\boxed{7}."},
    ]
    assert task.demo == demo
    assert task.messages(task.problems("heldout")[0]) == [
        SYSTEM,
        *demo,
        {"role": "user", "content": HELDOUT[0]["prompt"]},
    ]
    assert [p.id for p in task.problems("train")] == ["b", "0", "c"]  # asked it, the model could copy the answer
    assert task.messages(task.problems("train")[2]) == [SYSTEM, {"role": "user", "content": "What is 1 + 1?"}]
    assert task.bands == ["1-step", "10-step", "2-step"]  # every band is still the task's


def test_auto_never_shows_a_heldout_question_and_writes_the_tags_format(tmp_path):
    copy = [{**ROWS[1], "id": "h2"}]  # the problem auto would show is also held out
    task = load_task("jsonl", splits=splits(tmp_path, heldout=HELDOUT + copy), answer_format="tags")
    assert task.demo == [
        {"role": "user", "content": ROWS[0]["prompt"]},  # the next one by id
        {"role": "assistant", "content": "<answer>7</answer>"},
    ]
    assert [p.id for p in task.problems("train")] == ["a", "0", "c"]


def test_none_is_the_question_alone_and_auto_without_a_problem_to_show_is_none(tmp_path):
    task = load_task("jsonl", splits=splits(tmp_path), demo="none")
    assert task.demo == [] and len(task.problems("train")) == 4
    assert task.messages(task.problems("heldout")[0]) == [SYSTEM, {"role": "user", "content": HELDOUT[0]["prompt"]}]
    chat_only = load_task("jsonl", splits={"train": write(tmp_path / "c.jsonl", ROWS[3:])})
    assert chat_only.demo == [] and len(chat_only.problems("train")) == 1
    single = load_task("jsonl", splits={"train": write(tmp_path / "s.jsonl", ROWS[:1])})
    assert single.demo == [] and len(single.problems("train")) == 1  # showing it would leave nothing to train on


def test_a_users_exchange_is_shown_as_written_and_its_question_leaves_training(tmp_path):
    own = [
        {"role": "user", "content": "Ann has 3 cups and buys 4 more. How many cups?"},
        {"role": "assistant", "content": "3 + 4 = 7.\n\\boxed{7}"},
    ]
    task = load_task("jsonl", splits=splits(tmp_path), demo=own)
    assert task.messages(task.problems("heldout")[0]) == [
        SYSTEM,
        *own,
        {"role": "user", "content": HELDOUT[0]["prompt"]},
    ]
    assert [p.id for p in task.problems("train")] == ["a", "0", "c"]


FORM = "[{role: user, content: QUESTION}, {role: assistant, content: SOLUTION ending in the answer}]"


@pytest.mark.parametrize(
    "demo, message",
    [
        ("yes", f"task.settings.demo: give auto or none or a solved exchange {FORM}; got 'yes'"),
        ([], f"task.settings.demo: give auto or none or a solved exchange {FORM}; got []"),
        (
            False,
            f"task.settings.demo: give auto or none or a solved exchange {FORM}; got False (YAML reads yes, no, true "
            "and false as booleans)",
        ),
        (
            [{"role": "system", "content": "Be brief."}],
            "task.settings.demo[0]: expected {role: user, content: text}, got {'role': 'system', 'content': 'Be "
            f"brief.'}}; the turns go user, assistant, ... {FORM} (a system turn is task.settings.system_prompt)",
        ),
        (
            [{"role": "user", "content": "1+1?"}, {"role": "assistant", "content": "\\boxed{2}", "name": "x"}],
            "task.settings.demo[1]: expected {role: assistant, content: text}, got {'role': 'assistant', 'content': "
            f"'\\\\boxed{{2}}', 'name': 'x'}}; the turns go user, assistant, ... {FORM} (a system turn is "
            "task.settings.system_prompt)",
        ),
        ([{"role": "user", "content": " "}], "task.settings.demo[0]: empty content; user turns are text"),
        (
            [{"role": "user", "content": "1+1?"}],
            "task.settings.demo: the last turn must be the assistant's answer in the task's answer format (a final "
            "\\boxed{...}), which is what the demonstration is there to show; got '1+1?'",
        ),
        (
            [{"role": "user", "content": "1+1?"}, {"role": "assistant", "content": "It is 2."}],
            "task.settings.demo: the last turn must be the assistant's answer in the task's answer format (a final "
            "\\boxed{...}), which is what the demonstration is there to show; got 'It is 2.'",
        ),
        (
            [{"role": "user", "content": HELDOUT[0]["prompt"]}, {"role": "assistant", "content": "\\boxed{9}"}],
            "task.settings.demo: its question is problem 'h1' of another split than train; it would give that "
            "problem's answer away, so write the demonstration on another question",
        ),
    ],
)
def test_a_wrong_demo_is_one_line_naming_the_setting(tmp_path, demo, message):
    with pytest.raises(ConfigError) as e:
        load_task("jsonl", splits=splits(tmp_path), demo=demo)
    assert str(e.value) == message


def test_the_cli_refuses_a_wrong_demo_with_exit_2_before_a_run_exists(tmp_path, capsys):
    from rlvr.cli import main

    data = write(tmp_path / "d.jsonl", ROWS)
    out = tmp_path / "run"
    code = main(["train", "--set", "task.name=jsonl", "--set", f"task.settings={{path: {data}, demo: sometimes}}",
                 "--output-dir", str(out)])  # fmt: skip
    assert code == 2 and not out.exists()
    assert (
        capsys.readouterr().err.strip()
        == f"rlvr train: task.settings.demo: give auto or none or a solved exchange {FORM}; got 'sometimes'"
    )


def test_the_hub_task_takes_the_setting_and_defaults_to_none(monkeypatch, tmp_path):
    import datasets

    from test_tasks_hub import cache_dataset

    monkeypatch.setenv("HF_HUB_CACHE", str(cache_dataset(tmp_path, "any/set")))  # found in the cache: no request

    rows = [  # both land in the train split by the hub task's prompt hash
        {"prompt": "What is 4+4?", "solution": "8", "difficulty": 11},
        {"prompt": "What is 2+2?", "solution": "4", "difficulty": 3},
    ]
    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **k: datasets.Dataset.from_list(rows))
    assert load_task("hub", dataset="any/set").demo == []
    task = load_task("hub", dataset="any/set", demo="auto")  # band "difficulty 2-4" before "difficulty 10-12"
    assert task.demo == [
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "The answer is \\boxed{4}."},
    ]
    (left,) = task.problems("train")
    assert task.messages(left)[1:] == [*task.demo, {"role": "user", "content": "What is 4+4?"}]


# Issue 64: chat rows with a system turn of their own. They are used as written, so a setting that adds turns reaches
# none of them: refused in one line naming it (was: ignored without a word), and only where it reaches no row at all.
CHAT_SYS = [
    {
        "id": f"s{i}",
        "prompt": [
            {"role": "system", "content": "Think, then answer in <answer></answer>."},
            {"role": "user", "content": f"What is {i} + 1?"},
        ],
        "answer": str(i + 1),
    }
    for i in range(4)
]
CHAT_BARE = [{"id": "u", "prompt": [{"role": "user", "content": "What is 9 + 1?"}], "answer": "10"}]
OWN = [{"role": "user", "content": "What is 2 + 2?"}, {"role": "assistant", "content": "\\boxed{4}"}]


@pytest.mark.parametrize(
    "rows, settings, message",
    [
        (
            CHAT_SYS,
            "{{path: {path}, demo: [{{role: user, content: 'What is 2 + 2?'}}, {{role: assistant, content: "
            "'\\boxed{{4}}'}}]}}",
            "task.settings.demo: every row of {path} is chat messages, used as written, so this demonstration would "
            "never be shown; put the solved exchange into the rows' own turns, before the question, or drop the "
            "setting",
        ),
        (
            CHAT_SYS + CHAT_BARE,  # a row without a system turn: the system prompt reaches it, the demo still none
            "{{path: {path}, demo: [{{role: user, content: 'What is 2 + 2?'}}, {{role: assistant, content: "
            "'\\boxed{{4}}'}}], system_prompt: Be brief.}}",
            "task.settings.demo: every row of {path} is chat messages, used as written, so this demonstration would "
            "never be shown; put the solved exchange into the rows' own turns, before the question, or drop the "
            "setting",
        ),
        (
            CHAT_SYS,
            "{{path: {path}, system_prompt: Put the answer in a box.}}",
            "task.settings.system_prompt: every row of {path} has a system turn of its own, used as written, so this "
            "system prompt would never be shown; write the instruction into the rows' system turns, or drop the "
            "setting",
        ),
    ],
)
def test_a_setting_that_reaches_no_chat_row_is_refused(tmp_path, capsys, monkeypatch, rows, settings, message):
    from rlvr.cli import main

    def no_model(*a, **k):  # settings the checks let through must not start a real run in a test
        raise AssertionError("the settings were accepted: a model is being loaded")

    monkeypatch.setattr("rlvr.training.step.build_policy", no_model)
    data = write(tmp_path / "d.jsonl", rows)
    out = tmp_path / "run"
    code = main(["train", "--set", "task.name=jsonl", "--set", "task.settings=" + settings.format(path=data),
                 "--output-dir", str(out)])  # fmt: skip
    assert code == 2 and not out.exists()
    assert capsys.readouterr().err.strip() == "rlvr train: " + message.format(path=data)


def test_settings_that_reach_some_rows_or_do_nothing_by_definition_are_kept(tmp_path, monkeypatch):
    import datasets

    from rlvr.tasks.chat import prompt_rows

    data = write(tmp_path / "d.jsonl", CHAT_SYS + CHAT_BARE)
    for demo in ("auto", "none"):  # the default, and "no demonstration": nothing to refuse on chat rows
        task = load_task("jsonl", path=data, demo=demo, system_prompt="Be brief.")
        assert task.demo == [] and prompt_rows(task.problems("train") + task.problems("heldout")) == "chat"
        bare = next(p for ps in map(task.problems, ("train", "validation", "heldout")) for p in ps if p.id == "u")
        assert task.messages(bare)[0] == {"role": "system", "content": "Be brief."}  # the one row it reaches
    mixed = load_task("jsonl", path=write(tmp_path / "m.jsonl", CHAT_SYS + ROWS[:3]), demo=OWN, system_prompt="S")
    assert mixed.demo == OWN and prompt_rows([p for s in ("train", "heldout") for p in mixed.problems(s)]) == "text"
    assert prompt_rows(load_task("jsonl", path=write(tmp_path / "s.jsonl", CHAT_SYS)).problems("train")) == (
        "own_system"
    )
    # the hub task checks the same way (its rows, fetched, then the settings)
    from test_tasks_hub import cache_dataset

    monkeypatch.setenv("HF_HUB_CACHE", str(cache_dataset(tmp_path, "any/set")))  # found in the cache: no request
    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **k: datasets.Dataset.from_list(CHAT_SYS))
    with pytest.raises(ConfigError) as e:
        load_task("hub", dataset="any/set", answer_field="answer", system_prompt="S")
    assert str(e.value).startswith("task.settings.system_prompt: every row of any/set has a system turn of its own")


def test_the_run_records_the_demo_and_rlvr_eval_of_the_run_asks_with_it(tmp_path, tokenizer, monkeypatch):
    from conftest import make_tiny_llama
    from rlvr.cli import main
    from rlvr.evaluation import run_eval
    from rlvr.tasks.arithmetic import split_of
    from rlvr.training.loop import train
    from test_trainer import tiny_config

    rows = [{"id": f"q{i:02d}", "prompt": f"What is {i} + 1?", "answer": str(i + 1), "band": ["easy", "hard"][i % 2]}
            for i in range(40)]  # fmt: skip
    data = write(tmp_path / "sums.jsonl", rows)
    cfg = tiny_config(tmp_path, **{"task.settings": f"{{path: {data}}}"})
    run = train(cfg, policy=(make_tiny_llama(len(tokenizer)), tokenizer), quiet=True)
    shown = min((r for r in rows if r["band"] == "easy" and split_of(r["id"]) == "train"), key=lambda r: r["id"])
    # demo auto was measured on the start model (rlvr.evaluation.demo_choice): the run records the choice, its
    # figures and the setting it chose, so that nothing after measures again
    choice = json.loads((run / "demo.json").read_text())
    assert choice["chosen"] in ("demonstration", "none") and set(choice["figures"]) == {"demonstration", "none"}
    demo = (
        [
            {"role": "user", "content": shown["prompt"]},
            {"role": "assistant", "content": f"The answer is \\boxed{{{shown['answer']}}}."},
        ]
        if choice["chosen"] == "demonstration"
        else []
    )
    saved = yaml.safe_load((run / "config.yaml").read_text())["task"]["settings"]["demo"]
    assert saved == (demo or "none") == choice["settings"]["demo"]
    record = json.loads((run / "final" / "prompt_template.json").read_text())
    assert record["messages_before_question"] == [SYSTEM, *demo]
    assert record["example"]["messages"][1 : 1 + len(demo)] == demo
    for folder in ("adapter", "merged"):
        assert json.loads((run / "final" / folder / "prompt_template.json").read_text()) == record
    asked = []  # every chat `rlvr eval` of the run encodes: the run's own task, demo and all, from its config.yaml
    encode = run_eval.encode_prompt
    monkeypatch.setattr(run_eval, "encode_prompt", lambda tok, chat, fmt: asked.append(chat) or encode(tok, chat, fmt))
    argv = ["eval", "--model", str(run), "--n", "1", "--limit", "3", "--max-new-tokens", "4", "--no-greedy", "--quiet"]
    assert main(argv) == 0
    assert len(asked) == 3 and all(chat[:-1] == record["messages_before_question"] for chat in asked)
