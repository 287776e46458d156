"""Reference traces written by a function of the row (sft.reference, rlvr.training.reference_traces), on the
docs' example (docs/examples/unit_prices): the traces become SFT examples whose tool results are the tool's own
output; a function that raises, returns a malformed trace or disagrees with the tool is one line naming the problem;
traces that do not grade correct are dropped and counted; the column and the function are one or the other."""

from pathlib import Path

import pytest

from conftest import make_tiny_llama
from rlvr.config import Config, ConfigError, as_config, resolve
from rlvr.environments.build import environment_factory
from rlvr.tasks.base import DatasetError
from rlvr.training.reference_traces import reference_function, written_traces
from rlvr.training.sft_data import reference_examples
from rlvr.training.step import configured_reward

EXAMPLE = Path(__file__).resolve().parents[1] / "docs" / "examples" / "unit_prices"
REF = "mytools:reference_trace"


@pytest.fixture
def example(monkeypatch):
    """The example's config, read as its docs run it: from its folder, with the folder on the path."""
    monkeypatch.chdir(EXAMPLE)
    monkeypatch.syspath_prepend(str(EXAMPLE))
    import mytools

    cfg = as_config(resolve("unit_prices.yaml", ["reward.workers=0"]))
    task, resolved, reward = configured_reward(cfg)
    return cfg, task, reward, mytools


def traces_of(example, fn, problems=None, ref="test:fn"):
    cfg, task, reward, _ = example
    problems = problems if problems is not None else task.problems("train")
    make_env = environment_factory(cfg.episode, task, reward)
    return written_traces(fn, ref, problems, reward, make_env, cfg.episode.max_turns)


def test_written_traces_become_sft_examples_whose_tool_results_are_the_tools_own(example, tokenizer):
    cfg, task, reward, mytools = example
    problems = task.problems("train")
    assert len(problems) == 150 and {p.band for p in problems} == {"1-unit", "2-buy", "3-compare"}
    fn = reference_function(cfg, problems)
    assert fn is mytools.reference_trace
    traces, stats = traces_of(example, fn, ref=REF)
    assert stats == {"reference": REF, "reference_traces": 150, "reference_dropped": 0}
    tools = {"unit_price": environment_factory(cfg.episode, task, reward)().tools["unit_price"]}
    examples = reference_examples(tokenizer, task, problems, cfg.sft.reference_field, tools, traces)
    assert len(examples) == 150
    for p, e in zip(problems, examples):
        offers, buy = p.meta["offers"], p.meta["buy"]
        own = [str(mytools.unit_price(price, count, buy)) for price, count in offers]  # the tool, called here
        tool_said = [m["content"] for m in traces[p.id] if m["role"] == "tool"]
        assert tool_said == own  # mytools wrote no tool messages: these are the tool's output, run by rlvr
        masked = tokenizer.decode([t for t, m in zip(e["completion_ids"], e["completion_mask"]) if m == 0])
        trained = tokenizer.decode([t for t, m in zip(e["completion_ids"], e["completion_mask"]) if m == 1])
        assert all(v in masked for v in own) and '"name": "unit_price"' in trained
        assert trained.endswith(f"\\boxed{{{p.answer}}}" + tokenizer.eos_token)
    compare = next(e for p, e in zip(problems, examples) if p.band == "3-compare")
    assert compare["completion"].count("<tool_call>") == 2
    # the prompt shows the tool, as an RL episode's does
    assert '"name": "unit_price"' in tokenizer.decode(examples[0]["prompt_ids"])


def test_a_trace_that_disagrees_with_the_tool_or_cannot_be_an_episode_is_one_line(example):
    _, task, _, mytools = example
    p = task.problems("train")[0]  # train-1-unit-00: 19 batteries for 84.36, 4.44 each
    call = mytools.call(price=84.36, count=19)
    answer = {"role": "assistant", "content": "\\boxed{4.44}"}
    at = "sft.reference='test:fn' on problem 'train-1-unit-00'"
    cases = [
        (
            [{"role": "assistant", "content": call}, {"role": "tool", "content": "4.40"}, answer],
            f"{at}: after assistant turn 1 the trace says ['4.40'] but the tools returned ['4.44']; leave the tools' "
            "messages out and rlvr writes them",
        ),
        (
            [{"role": "assistant", "content": call}],
            f"{at}: the trace ends with a tool call; its last assistant turn gives the answer",
        ),
        ([answer, answer], f"{at}: the episode ended at assistant turn 1 of 2 (no tool call)"),
        (
            [{"role": "tool", "content": "4.44"}, answer],
            f"{at}: the trace starts with a 'tool' message; it starts with the assistant's",
        ),
        (
            [{"role": "assistant", "content": call.replace("unit_price", "price_of")}, answer],
            f"{at}: assistant turn 1's tool call failed (unknown_tool): Error: unknown tool 'price_of'; tools: "
            "unit_price.",
        ),
        (
            [{"role": "assistant", "content": call}] * 3 + [answer],
            f"{at}: the trace has 4 assistant turns; episode.max_turns is 3",
        ),
        (
            42,
            f"{at} returned 42; a trace is the answer's text or a list of chat messages ({{'role': 'assistant', "
            "'content': ...}, then the tools' messages)",
        ),
        (["\\boxed{4.44}"], f"{at}: message 0 is '\\\\boxed{{4.44}}'; each message is {{'role': ..., 'content': str}}"),
    ]
    for trace, message in cases:
        with pytest.raises(ConfigError) as e:
            traces_of(example, lambda p, t=trace: t, [p])
        assert str(e.value) == message

    def raises(p):
        return p.meta["no_such_column"]

    with pytest.raises(ConfigError) as e:
        traces_of(example, raises, [p])
    assert str(e.value) == "sft.reference='test:fn' on problem 'train-1-unit-00' raised KeyError: 'no_such_column'"


def test_traces_that_do_not_grade_correct_are_dropped_and_counted(example, capsys):
    _, task, _, mytools = example
    problems = task.problems("train")[:10]

    def off_by_a_cent(p):  # the first three answer wrong: the traces the grader refuses are dropped
        trace = mytools.reference_trace(p)
        if p.id in {q.id for q in problems[:3]}:
            trace[-1] = {"role": "assistant", "content": "\\boxed{0.01}"}
        return trace

    traces, stats = traces_of(example, off_by_a_cent, problems)
    assert sorted(traces) == sorted(q.id for q in problems[3:])
    assert stats["reference_dropped"] == 3 and stats["reference_traces"] == 10
    assert capsys.readouterr().err.strip() == (
        "WARNING: sft.reference='test:fn': 3 of 10 traces do not grade correct under the task's verifier and are "
        "dropped (first: problem 'train-1-unit-00', wrong, read '0.01')"
    )
    # text traces (no tools) are graded as they are
    texts, stats = traces_of(example, lambda p: f"\\boxed{{{p.answer}}}" if p.band == "1-unit" else "no", problems)
    assert len(texts) == 10 and stats["reference_dropped"] == 0
    with pytest.raises(DatasetError, match="no written trace grades correct under the task's verifier"):
        reference_examples(None, task, problems, "trace", {}, {})


def test_text_traces_are_graded_in_one_reward_call_in_problem_order(example):
    """A reward call per text trace started a worker pool per trace (35 ms each: 160 s for the default task's 4832);
    all of them go in one call now, and each verdict stays with its problem."""
    cfg, task, reward, _ = example
    problems = task.problems("train")[:6]
    calls = []

    def counted(completions, probs):
        calls.append(len(completions))
        return reward(completions, probs)

    wrong = {problems[1].id, problems[4].id}
    traces, stats = written_traces(
        lambda p: "\\boxed{0.01}" if p.id in wrong else f"\\boxed{{{p.answer}}}", "test:fn", problems, counted, None, 8
    )
    assert calls == [6]
    assert list(traces) == [p.id for p in problems if p.id not in wrong] and stats["reference_dropped"] == 2


def test_the_column_or_the_function_one_of_them(example, tmp_path):
    cfg, task, _, _ = example
    problems = task.problems("train")
    with pytest.raises(ConfigError) as e:
        reference_function(as_config(resolve("tool-use", [f"sft.reference={REF}"])), [_with_trace(problems[0])])
    assert str(e.value) == (
        "sft.reference='mytools:reference_trace' and sft.reference_field='trace' both give reference traces (1 "
        "training problems have a 'trace' column): set sft.reference_field: '' to use the function, or drop "
        "sft.reference"
    )
    no_fn = Config.from_dict({**cfg.to_dict(), "sft": {**cfg.to_dict()["sft"], "reference": ""}})
    with pytest.raises(ConfigError) as e:
        reference_function(no_fn, problems)
    assert str(e.value) == (
        "sft.source=reference: no training problem has a 'trace' column (sft.reference_field) and sft.reference "
        "names no function; add the column, or set sft.reference: package.module:attr, a function (problem) -> trace"
    )
    for ref, message in [
        ("mytools:nothing", "sft.reference='mytools:nothing': module 'mytools' has no attribute 'nothing'"),
        ("mytools", "sft.reference='mytools': write package.module:attr, a function (problem) -> trace"),
        (
            "mytools:json",
            "sft.reference='mytools:json' is not a function; it should take a problem and return its trace",
        ),
    ]:
        with pytest.raises(ConfigError) as e:
            reference_function(as_config(resolve("unit_prices.yaml", [f"sft.reference={ref}"])), problems)
        assert str(e.value) == message
    with pytest.raises(ConfigError) as e:
        reference_function(as_config(resolve("unit_prices.yaml", ["sft.source=samples"])), problems)
    assert (
        str(e.value)
        == "sft.reference='mytools:reference_trace' is read with sft.source: reference; sft.source is 'samples'"
    )
    # the column path is as before: the function stays out of it
    assert reference_function(as_config(resolve("tool-use")), [_with_trace(problems[0])]) is None


def _with_trace(p):
    import dataclasses

    return dataclasses.replace(p, meta={**p.meta, "trace": [{"role": "assistant", "content": "\\boxed{1}"}]})


def test_the_example_config_fine_tunes_on_its_written_traces(example, tokenizer, tmp_path):
    import json

    from rlvr.training.sft import sft

    overrides = [
        f"output_dir={tmp_path / 'run'}",
        "sft.max_examples=6",
        "sft.epochs=1",
        "sft.batch_size=3",
        "train.micro_batch_size=3",
        "rollout.dtype=float32",
        "train.autocast=none",
        "model.save_merged=false",
    ]
    cfg = as_config(resolve("unit_prices.yaml", ["reward.workers=0", *overrides]))
    run = sft(cfg, policy=(make_tiny_llama(len(tokenizer)), tokenizer), quiet=True)
    stats = json.loads((run / "sft_data.json").read_text())
    assert stats["reference"] == REF and stats["reference_dropped"] == 0 and stats["examples_available"] == 150
    assert stats["examples"] == 6 and stats["steps"] == 2
    kept = [json.loads(line) for line in (run / "kept.jsonl").read_text().splitlines()]
    assert len(kept) == 6 and all("<tool_call>" in k["completion"] for k in kept)
    # a function that fails stops rlvr sft before its run directory is made (the same command runs again once fixed)
    bad = as_config(resolve("unit_prices.yaml", [f"output_dir={tmp_path / 'bad'}", "sft.reference=mytools:money"]))
    with pytest.raises(ConfigError, match=r"^sft.reference='mytools:money' on problem 'train-1-unit-00' raised Type"):
        sft(bad, policy=(make_tiny_llama(len(tokenizer)), tokenizer), quiet=True)
    assert not (tmp_path / "bad").exists() and not (tmp_path / "bad-sft").exists()
