"""rlvr's verifiers inside TRL, verl and OpenRLHF: each adapter called the way its framework calls it, with
timeouts and verifier errors; a real TRL GRPOTrainer step where an interpreter with `trl` is at hand."""

import functools
import importlib.util
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import trl_python
from rlvr.verifiers.base import STATUSES, Verdict
from rlvr.verifiers.registry import KINDS, register_kind

ROOT = Path(__file__).resolve().parent.parent
TOWER = r"\boxed{2^{2^{2^{2^2}}}}"  # the math guard refuses it: a real `timeout` verdict


class Flaky:
    """A verifier that misbehaves on request: "spin" overruns its deadline (Python-level), "hang" sleeps in C
    (only a killed worker ends it), "raise" is a verifier bug; otherwise correct iff the text equals the gold."""

    name = "flaky"

    def score(self, completion, problem):
        if completion == "spin":
            while True:
                pass
        if completion == "hang":
            time.sleep(60)
        if completion == "raise":
            raise RuntimeError("verifier bug")
        gold = problem if isinstance(problem, str) else problem.answer
        ok = completion == gold
        return Verdict("correct" if ok else "wrong", float(ok), completion, "")


@pytest.fixture(autouse=True)
def flaky_kind():
    register_kind("flaky", lambda: Flaky())
    yield
    KINDS.remove("flaky")


# ---------------------------------------------------------------- TRL, in process (the calling convention)


def trl_call(func, completions, **columns):
    """As GRPOTrainer._calculate_rewards calls a reward function (TRL 1.16): keywords, every dataset column but
    the prompt, and TRL's extras."""
    metrics, extra = {}, {}
    got = func(
        prompts=[[{"role": "user", "content": "q"}]] * len(completions),
        completions=completions,
        completion_ids=[[1, 2]] * len(completions),
        trainer_state=None,
        log_metric=lambda k, v: metrics.setdefault(k, []).append(v),
        log_extra=lambda k, v: extra.setdefault(k, []).extend(v),
        **columns,
    )
    return got, metrics, extra


def test_trl_math_faults_are_none_and_timeouts_are_wrong():
    from rlvr.integrations.trl import reward_funcs

    funcs, weights = reward_funcs(None, workers=0)  # rlvr's default reward: math + format at 0.1
    assert [f.__name__ for f in funcs] == ["correct", "format"] and weights == [1.0, 0.1]
    completions = [
        [{"role": "assistant", "content": c}] for c in (r"\boxed{4}", r"\boxed{5}", "four", TOWER, r"\boxed{4}")
    ]
    answer = ["4", "4", "4", "4", r"\frac{"]
    correct, metrics, extra = trl_call(funcs[0], completions, answer=answer)
    fmt, _, _ = trl_call(funcs[1], completions, answer=answer)
    # an unusable gold says nothing about the completion: None; a timeout (the guard refused the tower) is the
    # completion's own, graded as a wrong answer (rlvr.verifiers.base.FAULT_STATUSES)
    assert correct == [1.0, 0.0, 0.0, 0.0, None]
    assert fmt == [1.0, 1.0, 0.0, 1.0, None]  # a fault row is left out whole, not paid the format bonus alone
    assert metrics["verdict/correct/timeout_frac"] == [0.2] and metrics["verdict/correct/invalid_gold_frac"] == [0.2]
    assert metrics["verdict/correct/correct_frac"] == [0.2] and len(metrics) == len(STATUSES)
    assert extra["correct_status"] == ["correct", "wrong", "no_answer", "timeout", "invalid_gold"]
    assert funcs[0].counts == {"correct": 1, "wrong": 1, "no_answer": 1, "timeout": 1, "invalid_gold": 1}


def test_trl_verifier_error_and_deadline_in_the_worker_pool():
    from rlvr.integrations.trl import reward_funcs

    funcs, weights = reward_funcs("flaky", workers=2, timeout_s=0.5)
    t0 = time.perf_counter()
    got, metrics, _ = trl_call(funcs[0], ["7", "spin", "raise", "hang", "8"], solution=["7"] * 5)
    assert got == [1.0, 0.0, None, 0.0, 0.0] and weights == [1.0]  # spin and hang time out: wrong; raise: a fault
    assert time.perf_counter() - t0 < 10  # the hung worker was killed at its deadline, not waited for
    assert metrics["verdict/flaky/timeout_frac"] == [0.4] and metrics["verdict/flaky/error_frac"] == [0.2]


def test_trl_gold_column_rule_and_keeping_only_some_faults_out():
    from rlvr.integrations.trl import reward_funcs

    funcs, _ = reward_funcs("math", workers=0, none_on=("error",))
    got, _, _ = trl_call(funcs[0], [r"\boxed{4}", TOWER], ground_truth=["4", "4"], solution=["5", "5"], gold=["4", "4"])
    assert got == [1.0, 0.0]  # gold (before solution and ground_truth) holds 4; the timeout stays a 0
    got, _, _ = trl_call(funcs[0], [r"\boxed{4}"], gold=[r"\frac{"])
    assert got == [0.0]  # an unusable gold, not in none_on: scored 0 rather than left out
    got, _, _ = trl_call(funcs[0], [r"\boxed{4}"], ground_truth=["4"])
    assert got == [1.0]
    with pytest.raises(ValueError, match="only fault statuses"):
        reward_funcs("math", none_on=("wrong",))
    with pytest.raises(ValueError, match="only fault statuses"):
        reward_funcs("math", none_on=("timeout",))  # the completion's own: never left out


def test_trl_spec_from_an_rlvr_config_and_the_shaping_rule(tmp_path):
    from rlvr.config import ConfigError
    from rlvr.integrations.trl import reward_funcs

    cfg = tmp_path / "rlvr.yaml"
    cfg.write_text(
        "reward:\n  terms:\n  - {name: ok, kind: exact, weight: 2.0}\n  - {name: fmt, kind: boxed_format, weight: 0.2}\n"
    )
    funcs, weights = reward_funcs(str(cfg))
    assert [f.__name__ for f in funcs] == ["ok", "fmt"] and weights == [2.0, 0.2]
    with pytest.raises(ConfigError, match="shaping term 'fmt'"):
        reward_funcs(
            {
                "terms": [
                    {"name": "ok", "kind": "exact", "weight": 1.0},
                    {"name": "fmt", "kind": "boxed_format", "weight": 0.5},
                ]
            }
        )


@pytest.mark.skipif(
    trl_python() is None,
    reason="trl is not installed here; set RLVR_TRL_PYTHON to a venv with trl "
    "(docs/performance.md: python3 -m venv trl-venv && pip install trl ...)",
)
def test_real_trl_grpo_step_with_timeouts_and_errors(tmp_path, tiny_policy):
    """GRPOTrainer (TRL's own loop) takes one step with rlvr's reward functions on a tiny model and the real
    tokenizer; its logs carry rlvr's verdict fractions, and what TRL received has None exactly at the faults."""
    model, tokenizer = tiny_policy
    model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    out = tmp_path / "out.json"
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}", "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.run(
        [trl_python(), str(ROOT / "tests" / "trl_grpo_step.py"), str(tmp_path / "model"), str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(out.read_text())
    assert got["global_step"] == 1
    (correct, fmt) = (
        [c for c in got["calls"] if c["name"] == "correct"],
        [c for c in got["calls"] if c["name"] == "format"],
    )
    assert len(correct) == len(fmt) == 1 and len(correct[0]["rewards"]) == 4
    lengths = correct[0]["lengths"]
    faulty = [n % 2 == 0 and n % 5 == 0 for n in lengths]  # errors only (tests/trl_grpo_step.py's flaky rule)
    assert [r is None for r in correct[0]["rewards"]] == faulty == [r is None for r in fmt[0]["rewards"]]
    log = got["logs"][0]
    n_timeout, n_error = sum(n % 2 == 1 for n in lengths), sum(n % 2 == 0 and n % 5 == 0 for n in lengths)
    assert log["verdict/correct/timeout_frac"] == n_timeout / 4 and log["verdict/correct/error_frac"] == n_error / 4
    scored = [r for r in correct[0]["rewards"] if r is not None]
    if scored:  # TRL's mean leaves the faults out; a timeout is scored 0
        assert log["rewards/correct/mean"] == pytest.approx(sum(scored) / len(scored))
    assert got["counts"][0] == {
        s: n
        for s, n in (
            ("timeout", n_timeout),
            ("error", n_error),
            ("correct", sum(r == 1.0 for r in scored)),
            ("wrong", sum(r == 0.0 for r in scored) - n_timeout),
        )
        if n
    }


# ---------------------------------------------------------------- verl


def load_like_verl(tmp_path, reward_kwargs=None):
    """verl's custom_reward_function: import `path` as a module, take `name`, bind reward_kwargs (functools.partial)."""
    path = tmp_path / "rlvr_reward.py"
    path.write_text("from rlvr.integrations.verl import compute_score\n")
    spec = importlib.util.spec_from_file_location("custom_module", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return functools.partial(module.compute_score, **(reward_kwargs or {}))


def test_verl_compute_score_dicts(tmp_path):
    fn = load_like_verl(tmp_path)

    def call(s, gt, ds="openai/gsm8k", info=None):
        return fn(data_source=ds, solution_str=s, ground_truth=gt, extra_info=info)

    right = call(r"so \boxed{18}", "18", info={"split": "train", "index": 3})
    assert right == {"score": 1.0, "acc": 1.0, "status": "correct", "pred": "18", "fault": 0.0}
    assert call(r"\boxed{17}", "18")["status"] == "wrong" and call("18", "18")["status"] == "no_answer"
    tower = call(TOWER, "18")
    assert (tower["score"], tower["status"], tower["fault"]) == (0.0, "timeout", 0.0)  # the completion's: wrong
    spin = fn(
        data_source="x",
        solution_str="spin",
        ground_truth="7",
        extra_info=None,
        spec={"terms": [{"name": "c", "kind": "flaky"}], "timeout_s": 0.3},
    )  # spec: verl's reward_kwargs
    assert (spin["score"], spin["status"], spin["fault"]) == (0.0, "timeout", 0.0)  # the completion's own
    bug = call("raise", "7", info={"verifier": "flaky"})
    assert (bug["status"], bug["fault"]) == ("error", 1.0)
    assert call("Paris", "paris", ds="exact")["status"] == "no_answer"  # data_source names the kind: exact wants a box
    assert call(r"\boxed{Paris}", "paris", ds="exact")["score"] == 1.0
    keys = {tuple(sorted(d)) for d in (right, tower, spin, bug)}
    assert keys == {("acc", "fault", "pred", "score", "status")}  # verl stacks every key per sample


def test_verl_reward_kwargs_spec_and_batch_form(tmp_path):
    fn = load_like_verl(tmp_path, {"spec": "default"})  # the default preset: math + format at 0.1
    assert fn(data_source="x", solution_str=r"\boxed{3}", ground_truth="3")["score"] == pytest.approx(1.1)
    from rlvr.integrations.verl import compute_score_batch

    spec = {"terms": [{"name": "correct", "kind": "flaky"}], "timeout_s": 0.5}
    t0 = time.perf_counter()
    out = compute_score_batch(
        data_sources=["a"] * 4,
        solution_strs=["7", "hang", "raise", "8"],
        ground_truths=["7"] * 4,
        extra_infos=[{}] * 4,
        spec=spec,
    )
    assert [d["status"] for d in out] == ["correct", "timeout", "error", "wrong"]
    assert [d["score"] for d in out] == [1.0, 0.0, 0.0, 0.0] and time.perf_counter() - t0 < 10
    mixed = compute_score_batch(["openai/gsm8k", "exact"], [r"\boxed{2}", r"\boxed{b}"], ["2", "B"], None)
    assert [d["status"] for d in mixed] == ["correct", "correct"]


def test_verl_code_ground_truth_as_stdio_cases():
    from rlvr.integrations.verl import compute_score

    code = "```python\nprint(int(input()) * 2)\n```"
    gt = json.dumps({"inputs": ["2\n", "5\n"], "outputs": ["4\n", "10\n"]})
    got = compute_score("codecontests", code, gt, {"verifier": "stdio"})
    assert got["status"] == "correct" and got["score"] == 1.0


# ---------------------------------------------------------------- OpenRLHF


def load_like_openrlhf(tmp_path, body="from rlvr.integrations.openrlhf import reward_func\n"):
    """OpenRLHF's --remote_rm_url FILE.py: import the file, take `reward_func`."""
    path = tmp_path / "reward_func.py"
    path.write_text(body)
    spec = importlib.util.spec_from_file_location("reward_func", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.reward_func


def test_openrlhf_reward_func_strips_prompts_and_counts_faults(tmp_path):
    import torch

    fn = load_like_openrlhf(tmp_path)
    prompt = "<|im_start|>user\nWhat is 2+2? Example: \\boxed{9}<|im_end|>\n<|im_start|>assistant\n"
    responses = [r"\boxed{4}<|im_end|>", r"\boxed{5}<|im_end|>", TOWER, r"\boxed{4}"]
    out = fn([prompt + r for r in responses], [prompt] * 4, ["4", "4", "4", r"\frac{"])
    assert set(out) == {"rewards", "scores", "extra_logs"}
    assert torch.allclose(
        out["rewards"], torch.tensor([1.1, 0.1, 0.1, 0.0])
    )  # the tower times out: a wrong boxed answer; the bad gold: 0
    assert out["scores"].tolist() == [1.0, 0.0, 0.0, 0.0]
    logs = {k: v.tolist() for k, v in out["extra_logs"].items()}
    assert set(logs) == {f"rlvr/{s}" for s in STATUSES}
    assert logs["rlvr/timeout"] == [0, 0, 1, 0] and logs["rlvr/invalid_gold"] == [0, 0, 0, 1]


LABEL_KEY = "give OpenRLHF --label_key naming the dataset's gold column"


@pytest.mark.parametrize(
    "labels, message",
    [
        (None, f"labels: missing (the gold per query; {LABEL_KEY})"),
        (["", " "], f"labels: all 2 empty or null, no gold to grade against; {LABEL_KEY}"),  # no --label_key
        ([None, None], f"labels: all 2 empty or null, no gold to grade against; {LABEL_KEY}"),
    ],
)
def test_openrlhf_reward_func_refuses_labels_without_any_gold(tmp_path, labels, message):
    """As rlvr serve's /get_reward answers 422: graded against nothing, every sample would train on 0."""
    fn = load_like_openrlhf(tmp_path)
    with pytest.raises(ValueError) as e:
        fn(["Q:\\boxed{4}", "Q:4"], ["Q:"] * 2, labels)
    assert str(e.value) == message


def test_openrlhf_one_row_without_gold_is_that_rows_invalid_gold(tmp_path):
    """An OpenRLHF dataset with one bad row: the batch is scored, the others' rewards as without it, the bad row 0.0
    and counted in rlvr/invalid_gold (OpenRLHF logs its mean: 1 of 5 = 0.2), as rlvr's own training treats it."""
    fn = load_like_openrlhf(tmp_path)
    responses = [r"\boxed{4}", r"\boxed{5}", r"\boxed{4}", "no box, 4", r"\boxed{6}"]
    golds = ["4", "4", "", "4", "6"]
    out = fn([f"Q{i}:" + r for i, r in enumerate(responses)], [f"Q{i}:" for i in range(5)], golds)
    good = [0, 1, 3, 4]
    alone = fn([f"Q{i}:" + responses[i] for i in good], [f"Q{i}:" for i in good], [golds[i] for i in good])
    assert alone["rewards"].tolist() == pytest.approx([1.1, 0.1, 0.0, 1.1])
    rewards = out["rewards"].tolist()
    assert [rewards[i] for i in good] == alone["rewards"].tolist() and rewards[2] == 0.0
    assert out["scores"].tolist() == [1.0, 0.0, 0.0, 0.0, 1.0]
    invalid = out["extra_logs"]["rlvr/invalid_gold"]
    assert invalid.tolist() == [0.0, 0.0, 1.0, 0.0, 0.0] and invalid.mean().item() == pytest.approx(0.2)
    assert out["extra_logs"]["rlvr/correct"].tolist() == [1.0, 0.0, 0.0, 0.0, 1.0]
    # a null label is the same: that row's invalid_gold
    none = fn(
        [f"Q{i}:" + r for i, r in enumerate(responses)], [f"Q{i}:" for i in range(5)], [*golds[:2], None, *golds[3:]]
    )
    assert none["rewards"].tolist() == rewards and none["extra_logs"]["rlvr/invalid_gold"].tolist() == invalid.tolist()


def test_openrlhf_made_from_a_spec_with_error_and_deadline(tmp_path):
    fn = load_like_openrlhf(
        tmp_path,
        "from rlvr.integrations.openrlhf import make_reward_func\n"
        "reward_func = make_reward_func('flaky', timeout_s=0.5)\n",
    )
    out = fn(["Q:7", "Q:spin", "Q:raise", "Q:8"], ["Q:"] * 4, ["7"] * 4)
    assert out["rewards"].tolist() == [1.0, 0.0, 0.0, 0.0]
    assert out["extra_logs"]["rlvr/timeout"].tolist() == [0, 1, 0, 0]
    assert out["extra_logs"]["rlvr/error"].tolist() == [0, 0, 1, 0]
    assert math.isclose(float(out["extra_logs"]["rlvr/correct"].mean()), 0.25)


def test_integrations_import_no_framework():
    """rlvr never imports TRL, verl or OpenRLHF: the adapters are plain functions."""
    code = (
        "import sys, rlvr.integrations.trl, rlvr.integrations.verl, rlvr.integrations.openrlhf; "
        "print([m for m in ('trl', 'verl', 'openrlhf', 'datasets') if m in sys.modules])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    assert out.stdout.strip() == "[]"


def doc_snippets() -> dict:
    """The runnable Python snippets of docs/integrations.md, by name."""
    import re

    text = (ROOT / "docs" / "integrations.md").read_text()
    return dict(re.findall(r"<!-- snippet: (\w+) -->\n```python\n(.*?)```", text, re.S))


@pytest.mark.parametrize(
    "name, expected",
    [
        (
            "verl",
            [
                "'status': 'correct'",
                "'status': 'timeout', 'pred': '2^{2^{2^{2^2}}}', 'fault': 0.0",
                "'status': 'invalid_gold'",
                "'fault': 1.0",
            ],
        ),
        ("openrlhf", ["[1.0, 0.0] [1.0, 0.0]"]),
    ],
)
def test_docs_snippets_run(tmp_path, name, expected):
    path = tmp_path / f"{name}.py"
    path.write_text(doc_snippets()[name])
    out = subprocess.run(
        [sys.executable, str(path)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    for piece in expected:
        assert piece in out.stdout, (piece, out.stdout)


@pytest.mark.slow
@pytest.mark.skipif(trl_python() is None, reason="trl is not installed here; set RLVR_TRL_PYTHON to a venv with trl")
def test_docs_trl_snippet_trains_two_steps(tmp_path):
    """The TRL snippet as a user runs it: the embedded default model, two GRPOTrainer steps (about 2 min on 2 cores)."""
    path = tmp_path / "trl_snippet.py"
    path.write_text(doc_snippets()["trl"])
    out = subprocess.run(
        [trl_python(), str(path)],
        capture_output=True,
        text=True,
        timeout=1200,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "'verdict/correct/timeout_frac'" in out.stdout.splitlines()[-1]


def test_a_whole_config_reads_answers_in_its_tasks_format():
    """A config whose task asks for <answer> tags grades tags through an adapter, as its own training does."""
    from rlvr.integrations.rewards import build
    from rlvr.tasks.base import Problem

    problem = Problem(id="0", prompt="What is 2 + 3?", answer="5")
    tags = build(
        {
            "task": {"name": "arithmetic", "settings": {"per_band": 20, "answer_format": "tags"}},
            "reward": {"workers": 0},
        }
    )
    result = tags(["<answer>5</answer>", "\\boxed{5}"], [problem, problem])
    assert [v.status for v in result.verdicts] == ["correct", "no_answer"]
    assert result.total == pytest.approx([1.1, 0.0])
    boxed = build({"task": {"name": "arithmetic", "settings": {"per_band": 20}}, "reward": {"workers": 0}})
    assert [v.status for v in boxed(["<answer>5</answer>", "\\boxed{5}"], [problem, problem]).verdicts] == [
        "no_answer",
        "correct",
    ]
