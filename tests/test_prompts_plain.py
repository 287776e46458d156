"""Base models (issue 67): a tokenizer without a chat template is prompted in the plain format (the R1-Zero frame,
the task's instruction, User / Assistant lines), token for token the same in training, SFT, evaluation and the final
artefacts; it stops at end of text or a next `User:` line; a chat format asked of it, and episodes in the plain format,
are refused in one line (exit 2) before any run directory exists."""

import json
import re
import shlex
from pathlib import Path

import pytest
import torch

from conftest import TWO_STEP_SETS, make_tiny_llama, train_two_steps
from rlvr.cli import main
from rlvr.config import ConfigError, resolve
from rlvr.prompts.chat import encode_prompt, plain_stop_ids, plain_text, prompt_format
from rlvr.tasks.arithmetic import ArithmeticTask
from rlvr.tasks.base import Problem

DOC = (Path(__file__).resolve().parent.parent / "docs" / "your-data.md").read_text()
SECTION = DOC[DOC.index("# Base models") : DOC.index("# Resume")]
EOS, USER = 2, 11126  # the real tokenizer's end of text (<|im_end|>) and its "User" token after a newline
QUESTION = Problem(id="q", prompt="What is 8 + 0?", answer="8")
BOXED_TEXT = (
    "A conversation between User and Assistant. The User asks a question, and the Assistant solves it. Solve the "
    "problem. Put the final answer inside \\boxed{}.\n"
    "User: Mia has 4 pens and gets 3 more. How many pens does Mia have now?\n"
    "Assistant: Mia has 4 + 3 = 7 pens.\n\\boxed{7}\n"
    "User: What is 8 + 0?\n"
    "Assistant:"
)


@pytest.fixture(scope="module")
def base_tokenizer(tokenizer):
    """The real tokenizer without its chat template: what a base checkpoint ships."""
    import copy

    tok = copy.deepcopy(tokenizer)
    tok.chat_template = None
    return tok


def stopping_at_user(vocab_size: int):
    """A tiny random Llama that writes the "User" token about half the time (tests/test_sft.py's trick): the final
    norm keeps one hidden dimension, along which "User"'s (tied) embedding is large."""
    model = make_tiny_llama(vocab_size)
    with torch.no_grad():
        keep = torch.zeros_like(model.model.norm.weight)
        keep[0] = 1.0
        model.model.norm.weight.copy_(keep)
        model.model.embed_tokens.weight[USER, 0] = 20.0
    return model


@pytest.fixture(scope="module")
def base_dir(tmp_path_factory, base_tokenizer):
    folder = tmp_path_factory.mktemp("base-model")
    stopping_at_user(len(base_tokenizer)).save_pretrained(folder)
    base_tokenizer.save_pretrained(folder)
    assert not (folder / "chat_template.jinja").exists()
    return folder


def test_the_plain_prompt_of_a_known_problem_text_and_ids(tokenizer, base_tokenizer):
    msgs = ArithmeticTask(per_band=5).messages(QUESTION)
    assert plain_text(msgs) == BOXED_TEXT
    assert f"```text\n{BOXED_TEXT.replace('What is 8 + 0?', '{question}')}\n```" in SECTION  # the doc quotes it
    ids = encode_prompt(base_tokenizer, msgs, "plain")
    assert ids == base_tokenizer(BOXED_TEXT, add_special_tokens=False)["input_ids"] and len(ids) == 93
    assert ids[:4] == [49, 6634, 826, 11122] and ids[-4:] == [198, 9519, 9531, 42]  # A conversation ... \nAssistant:
    # the tags format: its own instruction, the demonstration worked in tags
    tagged = plain_text(ArithmeticTask(per_band=5, answer_format="tags").messages(QUESTION))
    assert tagged.splitlines()[0].endswith(
        "the Assistant solves it. Think through the problem inside <think></think>, then give only the final answer "
        "inside <answer></answer>."
    )
    assert tagged.splitlines()[3] == "<answer>7</answer>"
    # a tokenizer whose rule puts a BOS first (Llama's) gets exactly one, as `tok(prompt)` gives it
    import copy

    llama_like = copy.deepcopy(base_tokenizer)
    llama_like.add_bos_token = True
    assert encode_prompt(llama_like, msgs, "plain") == [llama_like.bos_token_id, *ids]
    # the chat format is the template's, which has no such frame
    assert encode_prompt(tokenizer, msgs, "chat") != ids


def test_a_chat_row_with_a_tool_call_and_no_system_turn():
    msgs = [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "w", "arguments": {"c": 1}}}]},
        {"role": "tool", "content": "sunny"},
        {"role": "user", "content": "So?"},
    ]
    assert plain_text(msgs).splitlines() == [
        "A conversation between User and Assistant. The User asks a question, and the Assistant solves it.",
        "User: Weather?",
        "Assistant: <tool_call>",
        '{"name": "w", "arguments": {"c": 1}}',
        "</tool_call>",
        "Tool: sunny",
        "User: So?",
        "Assistant:",
    ]


def test_the_format_resolves_by_the_tokenizer_and_refuses_in_one_line(tokenizer, base_tokenizer):
    from rlvr.sampling import stop_ids

    assert prompt_format("auto", tokenizer) == "chat" and prompt_format("auto", base_tokenizer) == "plain"
    assert prompt_format("plain", tokenizer) == "plain" and prompt_format("chat", tokenizer) == "chat"
    with pytest.raises(ConfigError) as e:
        prompt_format("chat", base_tokenizer, "org/base")
    assert str(e.value) == (
        "model.prompt_format: chat, but the tokenizer of org/base has no chat template (a base model); choose plain, "
        'which prompts it as plain text, or auto (docs/your-data.md, "Base models")'
    )
    with pytest.raises(ConfigError) as e:
        prompt_format("auto", base_tokenizer, "org/base", episodes="tool")
    assert str(e.value) == (
        "episode.environment: tool needs a chat template (an episode's turns are chat messages), but org/base is "
        "prompted as plain text (model.prompt_format: auto, and its tokenizer has no chat template); episodes need a "
        'model with a chat template (docs/your-data.md, "Base models")'
    )
    # the stop ids: end of text, and in the plain format also the token that starts a next "User:" line
    assert plain_stop_ids(base_tokenizer) == [USER] and base_tokenizer.decode([USER]) == "User"
    config = make_tiny_llama(len(tokenizer)).config
    assert stop_ids(config, base_tokenizer, "plain") == [EOS, USER] and stop_ids(config, tokenizer, "chat") == [EOS]


def test_training_prompts_and_stops_in_the_plain_format(tmp_path, base_tokenizer):
    """The RL step's own prompt ids and sampler: the plain text's ids, the "User" stop."""
    from rlvr.training.step import check_components, setup

    sets = [f"output_dir={tmp_path / 'r'}", "reward.workers=0", "task.settings={per_band: 5}", "rollout.backend=hf"]
    parts = check_components(resolve(None, sets))
    state = setup(parts, policy=(make_tiny_llama(len(base_tokenizer)), base_tokenizer))
    problem = parts.task.problems("heldout")[0]
    text = plain_text(parts.task.messages(problem))
    assert text.endswith(f"\nUser: {problem.prompt}\nAssistant:") and text.startswith(BOXED_TEXT.split("User:")[0])
    assert state.prompt_ids(problem) == base_tokenizer(text)["input_ids"]
    assert state.sampler.stop_ids == [EOS, USER]


def test_a_base_model_trains_evaluates_and_fine_tunes_in_the_plain_format(
    tmp_path, base_dir, base_tokenizer, capsys, monkeypatch
):
    from rlvr.tasks import load_task

    run = tmp_path / "run"
    rows, samples = train_two_steps(base_dir, run, {"task.settings": "{per_band: 20}", "model.save_merged": "true"})
    # completions end where the model writes "User" (a stop): some rows stop, none run past it
    assert any(s["completion"].endswith("User") for s in samples) and rows[0]["len/truncated_frac"] < 1
    assert all("User" not in s["completion"][:-4] for s in samples)
    record = json.loads((run / "final" / "prompt_template.json").read_text())
    task = load_task("arithmetic", per_band=20)
    example = next(p for p in task.problems("train") if p.prompt == record["example"]["question"])
    assert record["prompt_format"] == "plain" and record["plain"]["stop_ids"] == [EOS, USER]
    assert record["plain"]["text_before_question"] == BOXED_TEXT.split("What is 8 + 0?")[0]
    assert record["plain"]["text_after_question"] == "\nAssistant:"
    assert record["example"]["prompt_text"] == plain_text(task.messages(example))
    for folder in ("adapter", "merged"):  # the tokenizer travels as it was: no template written into it
        assert not (run / "final" / folder / "chat_template.jinja").exists()
    # the card shows the text and its snippet, run as written, builds the training prompt token for token
    card = (run / "final" / "README.md").read_text()
    assert "Prompt format: `plain`" in card and "User: {question}\nAssistant:\n```" in card
    snippet = card.split("## Use\n\n```python\n")[1].split("```")[0]
    scope: dict = {}
    with monkeypatch.context() as m:
        m.chdir(run)  # the snippet's "final/merged"
        exec(snippet, scope)
    assert scope["inputs"]["input_ids"][0].tolist() == encode_prompt(base_tokenizer, task.messages(example), "plain")
    # rlvr eval of the run, and of the bare base folder (what the main job's start evaluation is): plain
    capsys.readouterr()
    evals = {"run": [str(run)], "bare": [str(base_dir), "--task", "arithmetic", "--out", str(tmp_path / "ev")]}
    for label, model in evals.items():
        argv = ["eval", "--model", *model, "--n", "1", "--limit", "3", "--max-new-tokens", "8", "--quiet"]
        assert main([*argv, "--set", "reward.workers=0", "--set", "task.settings.per_band=20"]) == 0, label
    for summary in (run / "eval" / "heldout" / "summary.json", tmp_path / "ev" / "summary.json"):
        assert json.loads(summary.read_text())["setup"]["prompt_format"] == "plain"
    records = [json.loads(x) for x in (tmp_path / "ev" / "records.jsonl").read_text().splitlines()]
    assert any(r["completion"].endswith("User") for r in records)
    # SFT: the rejection-sampled examples (a completion that ends in "User" is right here) are prompted in plain text
    data = tmp_path / "data.jsonl"
    data.write_text(
        "".join(json.dumps({"prompt": f"Say something about {i}.", "answer": "user"}) + "\n" for i in range(40))
    )
    sft_run = tmp_path / "sft"
    sets = {**TWO_STEP_SETS, "task.name": "jsonl", "task.settings": f"{{path: {data}}}", "sft.samples": 16}
    sets.update({"sft.epochs": 1, "reward.terms": "[{name: u, kind: regex, weight: 1.0, pattern: '(user)$'}]"})
    args = sum((["--set", f"{k}={v}"] for k, v in {"model.name": base_dir, **sets}.items()), [])
    assert main(["sft", "default", *args, "--output-dir", str(sft_run), "--quiet"]) == 0
    kept = [json.loads(x) for x in (sft_run / "kept_ids.jsonl").read_text().splitlines()]
    task = load_task("jsonl", path=str(data))
    by_id = {p.id: p for p in task.problems("train")}
    assert kept and all(
        k["prompt_ids"] == encode_prompt(base_tokenizer, task.messages(by_id[k["problem_id"]]), "plain") for k in kept
    )
    assert all(k["completion_ids"][-1] == USER for k in kept)


def test_a_chat_format_of_a_base_model_is_refused_before_the_run_directory(tmp_path, base_dir, capsys):
    line = (
        f"model.prompt_format: chat, but the tokenizer of {base_dir} has no chat template (a base model); choose "
        'plain, which prompts it as plain text, or auto (docs/your-data.md, "Base models")'
    )
    out = tmp_path / "run"
    for verb in ("train", "sft", "run"):
        capsys.readouterr()
        argv = [verb, "--set", f"model.name={base_dir}", "--set", "model.prompt_format=chat", "--output-dir", str(out)]
        assert main(argv) == 2, verb
        assert capsys.readouterr().err.strip() == f"rlvr {verb}: {line}" and not out.exists()
    assert f"rlvr train: {line}".replace(str(base_dir), "path/to/base-model") in SECTION  # as the doc quotes it
    capsys.readouterr()
    argv = ["eval", "--model", str(base_dir), "--task", "arithmetic", "--set", "model.prompt_format=chat"]
    assert main([*argv, "--out", str(out)]) == 2
    # (after the model loaded: transformers' loading bar may come first)
    assert capsys.readouterr().err.strip().splitlines()[-1] == f"rlvr eval: {line}" and not out.exists()
    capsys.readouterr()
    argv = ["train", "--set", f"model.name={base_dir}", "--set", "episode.environment=retry", "--output-dir", str(out)]
    assert main(argv) == 2 and "episode.environment: retry needs a chat template" in capsys.readouterr().err
    assert not out.exists()


def test_the_docs_one_command_trains_a_base_model_in_the_plain_format(tmp_path, base_dir, monkeypatch):
    """docs/your-data.md, "Base models": its command as written (the default preset: the fast sampler), on the tiny
    base model and at the first-hour test's sizes."""
    monkeypatch.chdir(tmp_path)
    (command,) = re.findall(r"```bash\n(.*?)```", SECTION, re.S)
    args = shlex.split(command.strip().replace("path/to/base-model", str(base_dir)))
    tiny = ["rollout.prompts_per_step=2", "rollout.group_size=4", "rollout.max_new_tokens=6", "reward.workers=0"]
    tiny += [
        "train.steps=2",
        "model.lora.r=4",
        "log.eval_every=0",
        "eval.out_of_domain=[]",
        "task.settings.per_band=20",
    ]
    assert args[:3] == ["rlvr", "train", "default"] and main(args[1:] + sum((["--set", s] for s in tiny), [])) == 0
    record = json.loads(Path("runs/zero/final/prompt_template.json").read_text())
    assert record["prompt_format"] == "plain" and record["plain"]["stop_ids"] == [EOS, USER]
    samples = [json.loads(x) for x in Path("runs/zero/samples.jsonl").read_text().splitlines()]
    assert any(s["completion"].endswith("User") for s in samples)  # the fast sampler stops there too
