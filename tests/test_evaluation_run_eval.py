"""evaluate_model and `rlvr eval` end to end on a tiny random Llama with the real tokenizer: the records and
the summary agree, a run directory's recorded reward and task are reused, a contaminated split is refused
before any sampling, and the same seed gives the same completions."""

import json
from dataclasses import replace

import pytest
import yaml

from conftest import make_tiny_llama
from rlvr.config import DEFAULTS, as_config
from rlvr.evaluation.records import read_records
from rlvr.evaluation.run_eval import EvalSettings, evaluate_model, limit_problems
from rlvr.tasks.base import Problem
from rlvr.tasks.hygiene import ContaminationError

# First character of the completion in a-m: a random model meets it about half the time.
FIRST_CHAR = {
    "terms": [{"name": "first_char", "kind": "regex", "weight": 1.0, "pattern": "^\\s*(\\S)", "gold_is_pattern": True}],
    "workers": 0,
}
NEVER = {"terms": [{"name": "never", "kind": "regex", "weight": 1.0, "pattern": "(?!x)x"}], "workers": 0}


def write_rows(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def splits(tmp_path, heldout_extra=()):
    train = [{"id": f"t{i}", "prompt": f"Tell me a story about the number {i}.", "answer": "[a-m]"} for i in range(10)]
    heldout = [
        {
            "id": f"h{i}",
            "prompt": f"Name a colour, please, for case {i}.",
            "answer": "[a-m]",
            "band": ["easy", "hard"][i % 2],
        }
        for i in range(6)
    ]
    return {
        "train": write_rows(tmp_path / "train.jsonl", train),
        "heldout": write_rows(tmp_path / "heldout.jsonl", heldout + list(heldout_extra)),
    }


def test_records_and_summary_add_up(tmp_path, tokenizer):
    policy = (make_tiny_llama(len(tokenizer)), tokenizer)
    records, summary = evaluate_model(
        policy,
        "jsonl",
        EvalSettings(n=4, ks=(1, 2, 4, 8), max_new_tokens=6, progress=False, n_boot=200),
        task_settings={"splits": splits(tmp_path)},
        cfg=as_config({"reward": FIRST_CHAR}),
    )
    sampled = [r for r in records if r.mode == "sampled"]
    greedy = [r for r in records if r.mode == "greedy"]
    assert len(sampled) == 6 * 4 and len(greedy) == 6
    assert summary["ks"] == [1, 2, 4]  # k > n dropped instead of failing after sampling
    assert list(summary["bands"]) == ["easy", "hard"]
    assert [b["n_problems"] for b in summary["bands"].values()] == [3, 3]
    overall = summary["overall"]
    assert overall["n_problems"] == 6 and overall["samples_per_problem"] == 4
    assert overall["pass@k"]["1"]["value"] == pytest.approx(sum(r.correct for r in sampled) / 24)
    assert overall["greedy"]["value"] == pytest.approx(sum(r.correct for r in greedy) / 6)
    assert sum(overall["status"].values()) == pytest.approx(1.0)
    assert 0 < overall["pass@k"]["1"]["value"] < 1  # the regex reward really ran on real completions
    assert summary["hygiene"] == {
        "train_problems": 9,  # of 10: demo auto shows one before each question and leaves it out (rlvr.tasks.demo)
        "contaminated": 0,
        "overlaps": [],
        "leaks": 0,
        "leak_examples": [],
    }
    # same seed, same completions
    again, _ = evaluate_model(
        (policy[0], tokenizer),
        "jsonl",
        EvalSettings(n=4, ks=(1,), max_new_tokens=6, progress=False, n_boot=50),
        task_settings={"splits": splits(tmp_path)},
        cfg=as_config({"reward": FIRST_CHAR}),
    )
    assert [r.completion for r in again] == [r.completion for r in records]


def test_greedy_only_evaluation(tmp_path, tokenizer):
    """n = 0: the greedy decode alone, the same greedy completions as beside samples; n = 0 without it is refused."""
    from rlvr.evaluation.summary import summary_markdown

    policy = (make_tiny_llama(len(tokenizer)), tokenizer)
    kw = dict(task_settings={"splits": splits(tmp_path)}, cfg=as_config({"reward": FIRST_CHAR}))
    settings = EvalSettings(n=0, ks=(1, 4), max_new_tokens=6, progress=False, n_boot=50)
    records, summary = evaluate_model(policy, "jsonl", settings, **kw)
    assert [r.mode for r in records] == ["greedy"] * 6 and summary["ks"] == []
    assert summary["overall"]["pass@k"] == {} and summary["overall"]["status"] is None
    both, _ = evaluate_model(policy, "jsonl", replace(settings, n=2), **kw)
    assert [r.completion for r in records] == [r.completion for r in both if r.mode == "greedy"]
    assert summary["overall"]["greedy"]["value"] == pytest.approx(sum(r.correct for r in records) / 6)
    assert "Verdict statuses of the greedy completions" in summary_markdown(summary)
    with pytest.raises(ValueError, match="greedy only"):
        evaluate_model(policy, "jsonl", replace(settings, greedy=False), **kw)


def test_contaminated_split_is_refused_before_sampling(tmp_path, tokenizer):
    copy = {"id": "dup", "prompt": "  TELL me a story   about the number 3 ", "answer": "[a-m]"}
    task = {"splits": splits(tmp_path, [copy])}
    with pytest.raises(ContaminationError, match="1 of 7 problems overlap"):
        evaluate_model(
            ("not a model", tokenizer),
            "jsonl",
            EvalSettings(n=2, progress=False),
            task_settings=task,
            cfg=as_config({"reward": FIRST_CHAR}),
        )
    _, summary = evaluate_model(
        (make_tiny_llama(len(tokenizer)), tokenizer),
        "jsonl",
        EvalSettings(n=2, ks=(1,), max_new_tokens=4, allow_contaminated=True, progress=False, n_boot=50),
        task_settings=task,
        cfg=as_config({"reward": FIRST_CHAR}),
    )
    assert summary["hygiene"]["contaminated"] == 1
    assert summary["hygiene"]["overlaps"][0]["eval_id"] == "dup"


def make_run_dir(tmp_path, tokenizer):
    """A finished run as training leaves it: config.yaml with its task and reward, final/merged."""
    from rlvr.config import resolve
    from rlvr.policy.load import save_policy

    run = tmp_path / "run"
    cfg = resolve(None, ["task.name=jsonl"])
    cfg["task"]["settings"] = {"splits": splits(tmp_path)}
    cfg["reward"] = NEVER
    run.mkdir()
    (run / "config.yaml").write_text(yaml.safe_dump(cfg))
    save_policy(make_tiny_llama(len(tokenizer)), tokenizer, run / "final")
    return run


def test_run_dir_reuses_its_reward_and_task(tmp_path, tokenizer):
    run = make_run_dir(tmp_path, tokenizer)
    records, summary = evaluate_model(
        run, None, EvalSettings(n=2, ks=(1,), max_new_tokens=4, greedy=False, progress=False, n_boot=50)
    )
    # the run's reward section, completed from the defaults as every config.yaml is read (rlvr.rundir.files.read_config)
    assert summary["setup"]["reward"] == {**DEFAULTS["reward"], **NEVER} and summary["setup"]["task"] == "jsonl"
    assert len(records) == 12 and {r.status for r in records} == {"no_answer"}  # the run's reward, not ours
    assert summary["overall"]["status"]["no_answer"] == 1.0


def test_eval_verb_writes_its_files(tmp_path, tokenizer, capsys):
    import argparse

    from rlvr.cli import eval as eval_verb

    run = make_run_dir(tmp_path, tokenizer)
    parser = argparse.ArgumentParser()
    eval_verb.add_parser(parser.add_subparsers(dest="verb"))
    args = parser.parse_args(
        [
            "eval",
            "--model",
            str(run),
            "--n",
            "2",
            "--k",
            "1,2",
            "--max-new-tokens",
            "4",
            "--limit",
            "4",
            "--quiet",
            "--set",
            "reward.workers=0",
        ]
    )
    assert eval_verb.run(args) == 0
    out = run / "eval" / "heldout"
    records = read_records(out / "records.jsonl")
    summary = json.loads((out / "summary.json").read_text())
    assert len(records) == 4 * 2 + 4 and summary["overall"]["n_problems"] == 4
    assert [b["n_problems"] for b in summary["bands"].values()] == [2, 2]  # --limit takes bands evenly
    assert "| **all** | 4 | 2 |" in (out / "summary.md").read_text()
    assert "pass@1" in capsys.readouterr().out
    bad = parser.parse_args(["eval", "--model", str(run), "--set", "model.name=x"])
    assert eval_verb.run(bad) == 2


BUILT = []  # the backends test_eval_backend_is_the_registry_s_or_a_plugin's plug-in built


def counted_hf(model, tokenizer, stop_ids, dtype, threads, settings):
    """A plug-in sampler backend (--backend test_evaluation_run_eval:counted_hf): the hf sampler, counted."""
    from rlvr.sampling import BACKENDS

    BUILT.append(dtype)
    return BACKENDS.get("hf").make(model, tokenizer, stop_ids, dtype, threads, settings)


def test_eval_backend_is_the_registry_s_or_a_plugin(tmp_path, tokenizer, capsys):
    """--backend takes the sampler registry's names (no list of its own) or package.module:attr, as rollout.backend
    does; a wrong one is exit 2 naming the choices, before any model loads."""
    from rlvr.cli import main
    from rlvr.sampling import BACKENDS

    run = make_run_dir(tmp_path, tokenizer)
    argv = ["eval", "--model", str(run), "--n", "1", "--max-new-tokens", "2", "--limit", "2", "--quiet"]
    assert main([*argv, "--set", "reward.workers=0", "--backend", "test_evaluation_run_eval:counted_hf"]) == 0
    assert len(BUILT) == 1 and "pass@1" in capsys.readouterr().out
    assert main([*argv, "--backend", "tpu"]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        err
        == "rlvr eval: --backend: unknown sampler backend 'tpu'; choose from hf, fast, remote, vllm, or package.module:attr"
    )
    BACKENDS.add("abacus", BACKENDS.get("hf"), "a test's backend")
    try:
        assert main([*argv, "--backend", "abacus", "--out", str(tmp_path / "abacus")]) == 0  # a new entry: no 2nd list
    finally:
        BACKENDS.remove("abacus")


@pytest.mark.parametrize(
    "limit, expected",
    [
        (None, ["a0", "a1", "a2", "b0", "c0", "c1"]),
        (3, ["a0", "b0", "c0"]),
        (4, ["a0", "a1", "b0", "c0"]),
        (5, ["a0", "a1", "b0", "c0", "c1"]),  # b is exhausted, the others keep taking turns
    ],
)
def test_limit_takes_bands_evenly_in_original_order(limit, expected):
    problems = [Problem(pid, "q", "1", band=pid[0]) for pid in ["a0", "a1", "a2", "b0", "c0", "c1"]]
    assert [p.id for p in limit_problems(problems, limit)] == expected


@pytest.mark.slow
def test_real_default_model_reports_every_band(request):
    # pyproject has no `-m "not slow"` default yet, so the real model (1-2 minutes here) waits for -m slow
    if "slow" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("uses the real default model; run with -m slow")
    records, summary = evaluate_model(
        "smollm2-135m-instruct",
        "arithmetic",
        EvalSettings(n=2, ks=(1, 2), max_new_tokens=24, limit=3, allow_contaminated=True, progress=False, n_boot=100),
    )
    assert list(summary["bands"]) == ["1-digit", "2-digit", "3-digit"]
    assert len(records) == 3 * 2 + 3 and summary["setup"]["reward"]["terms"][0]["kind"] == "math"
    assert sum(summary["overall"]["status"].values()) == pytest.approx(1.0)


def test_eval_refuses_a_reward_that_cannot_grade_the_task(tmp_path, model_dir, capsys):
    """`rlvr eval --task humaneval` with a math reward: exit 2 naming the task, the term and the grader that fits."""
    from rlvr.cli import main

    code = main(
        [
            "eval",
            "--model",
            str(model_dir),
            "--task",
            "humaneval",
            "--n",
            "1",
            "--limit",
            "2",
            "--quiet",
            "--set",
            "reward.terms=[{name: correct, kind: math}]",
            "--out",
            str(tmp_path / "out"),
        ]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "kind 'math') grades answer, but task 'humaneval' carries hidden tests" in err and "python_tests" in err
    assert not (tmp_path / "out").exists()


# Issue 64: `rlvr eval` as a new user met it. Each mistake is one line, exit 2, before a model loads and before
# anything is written.
@pytest.fixture
def no_model(monkeypatch):
    """transformers refuses to load anything: a test that passes refused before a tokenizer or model was read."""
    import transformers

    def refuse(*a, **k):
        raise AssertionError("a model is being loaded")

    for auto in (transformers.AutoTokenizer, transformers.AutoModelForCausalLM):
        monkeypatch.setattr(auto, "from_pretrained", refuse)


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--n", "-1"], "--n -1: samples per problem must be >= 1, or 0 for the greedy decode alone"),
        (["--n", "0", "--no-greedy"], "--n 0 with --no-greedy: nothing to evaluate; give --n 1 or more, or drop --no-greedy"),
        (["--k", "0,2"], "--k 0,2: each k must be >= 1 (a k above --n is dropped)"),
        (["--k", "1,four"], "--k '1,four': give whole numbers separated by commas, e.g. 1,4,8"),
        (
            ["--temperature", "0"],
            "--temperature 0: the sampling temperature must be > 0 (the greedy decode runs beside the samples; --n 0 "
            "for it alone)",
        ),
        (["--max-new-tokens", "0"], "--max-new-tokens 0: new tokens per completion must be >= 1"),
        (["--limit", "-5"], "--limit -5: problems to evaluate must be >= 1, or 0 for all of them"),
        (["--rows-per-call", "0"], "--rows-per-call 0: sequences per generate call must be >= 1"),
    ],
)  # fmt: skip
def test_eval_refuses_a_bad_number_before_the_model_loads(tmp_path, capsys, no_model, flags, message):
    from rlvr.cli import main

    out = tmp_path / "out"
    assert main(["eval", "--model", "smollm2-135m-instruct", "--task", "arithmetic", "--out", str(out), *flags]) == 2
    assert capsys.readouterr().err == f"rlvr eval: {message}\n" and not out.exists()


def test_eval_help_says_limit_0_is_all():
    from rlvr.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "verb").choices["eval"]
    limit = next(a for a in sub._actions if a.dest == "limit")
    assert limit.help == "evaluate N problems, taken evenly across bands (default, and 0: all problems)"


def test_eval_of_a_folder_that_is_no_model_says_what_it_is(tmp_path, tokenizer, capsys, no_model):
    """An evaluation's folder, a folder of them, a run's checkpoints/ and final/: named, with what to pass (was:
    "You need to have sentencepiece or tiktoken installed", after transformers tried it as a model)."""
    from rlvr.cli import main

    run = make_run_dir(tmp_path, tokenizer)
    capsys.readouterr()  # saving it wrote a progress bar
    for step in (2, 10, 4):  # the newest by number, not by name
        (run / "checkpoints" / f"step-{step}").mkdir(parents=True)
        (run / "checkpoints" / f"step-{step}" / "trainable.safetensors").write_bytes(b"")
    evals = tmp_path / "mine-eval"
    for name, model in (("start", "smollm2-135m-instruct"), ("rlvr", str(run))):
        (evals / name).mkdir(parents=True)
        (evals / name / "records.jsonl").write_text("")
        (evals / name / "summary.json").write_text(json.dumps({"setup": {"model": model}}))
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("")
    args = ["--task", "jsonl", "--set", f"task.settings.path={tmp_path / 'train.jsonl'}", "--quiet"]
    expected = {
        evals / "rlvr": "an evaluation's output folder (records.jsonl, summary.json), not a model; pass the model it "
        f"evaluated ({run}), or compare evaluations with rlvr compare NAME=FOLDER/records.jsonl ...",
        evals: f"a folder of evaluations (rlvr, start), not a model; pass a model they evaluated ({run}, "
        f"smollm2-135m-instruct), or compare them: rlvr compare rlvr={evals}/rlvr/records.jsonl "
        f"start={evals}/start/records.jsonl",
        run / "checkpoints": f"the checkpoints folder of the run {run}; pass one of them ({run}/checkpoints/step-10, "
        f"the newest) or the run folder {run} (its final model)",
        run / "final": f"the final folder of the run {run}; pass the run folder, {run} (its task and reward come too)",
        tmp_path / "notes": "the folder holds no config.json, so it is no model folder (it holds todo.txt)",
    }
    for folder, why in expected.items():
        out = tmp_path / "out"
        assert main(["eval", "--model", str(folder), *args, "--out", str(out)]) == 2
        assert capsys.readouterr().err == f"rlvr eval: model {str(folder)!r}: {why}\n" and not out.exists()


def test_eval_refuses_an_existing_output_folder_unless_overwrite(tmp_path, tokenizer, capsys, monkeypatch):
    """As `rlvr train` refuses its output directory: the evaluation there (the one a model card may cite) is kept,
    the model not even loaded; --overwrite replaces the folder whole."""
    from rlvr.cli import main
    from rlvr.policy import load

    run = make_run_dir(tmp_path, tokenizer)
    argv = ["eval", "--model", str(run), "--n", "1", "--max-new-tokens", "2", "--limit", "2", "--quiet"]
    assert main([*argv, "--set", "reward.workers=0"]) == 0
    capsys.readouterr()
    out = run / "eval" / "heldout"
    (out / "ood-old").mkdir()  # what an earlier evaluation left beside its records
    before = (out / "summary.json").read_text()
    loads = []
    monkeypatch.setattr(load, "load_policy", lambda *a, **k: loads.append(a) or pytest.fail("a model loaded"))
    for extra in ([], ["--out", str(out)]):
        assert main([*argv, "--n", "2", *extra]) == 2
        assert capsys.readouterr().err == (
            f"rlvr eval: output directory {out} exists; pass --overwrite to replace it, or --out another folder\n"
        )
    assert (out / "summary.json").read_text() == before and loads == []
    monkeypatch.undo()
    assert main([*argv, "--n", "2", "--overwrite"]) == 0
    assert json.loads((out / "summary.json").read_text())["setup"]["n"] == 2 and not (out / "ood-old").exists()
