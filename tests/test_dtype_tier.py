"""The dtype tier: every path whose arithmetic depends on the kind of machine, run as each kind runs it, on any machine.

`auto` (rollout.dtype, train.autocast) resolves by the CPU: bf16 sampling and bf16 autocast on AVX512-BF16 / AMX CPUs
(the update then stores its frozen base in bf16), float32 and no autocast on an AVX2-only one. A suite run on one kind
takes one branch only, so each test here runs twice, with $RLVR_NATIVE_BF16 telling rlvr.machine which kind this is
(bf16 is emulated and slow on an AVX2 CPU: hence the tiny model), and checks from the run's own config.yaml that the
branch it meant ran. What each asserts is the kind's contract: every step trained, the sampler's log-probs the
trainer's within the dtype's mismatch (docs/scaling.md: float32 to rounding, bf16 about 1e-3 k3), a resume exact,
a checkpoint's evaluation the final model's. docs/reliability.md, "Both kinds of machine", lists the paths.
"""

import json
import warnings
from dataclasses import dataclass

import pytest
import torch
from safetensors.torch import load_file

from conftest import FAST_FAMILIES, make_tiny_llama, make_tiny_model
from rlvr import machine
from rlvr.training.loop import train
from test_trainer import tiny_config


@dataclass(frozen=True)
class Kind:
    native: str  # $RLVR_NATIVE_BF16
    rollout_dtype: str  # what rollout.dtype: auto resolves to
    autocast: str  # what train.autocast: auto resolves to
    k3_bound: float  # mismatch/k3_kl of a local sampler against the trainer, tiny model


KINDS = {
    "bf16": Kind("1", "bfloat16", "bfloat16", 2e-2),
    "float32": Kind("0", "float32", "none", 1e-6),
}
AUTO = {"rollout.dtype": "auto", "train.autocast": "auto", "train.steps": 2, "log.checkpoint_every": 1}


@pytest.fixture(params=list(KINDS))
def kind(request, monkeypatch):
    """The machine kind this test runs as: `auto` resolves to its dtypes, here and in the commands it starts."""
    monkeypatch.setenv("RLVR_NATIVE_BF16", KINDS[request.param].native)
    machine.native_bf16.cache_clear()
    yield KINDS[request.param]
    machine.native_bf16.cache_clear()


def rows_of(run) -> list[dict]:
    return [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]


def check_run(run, kind: Kind, steps: int = 2, exact_steps: int | None = None) -> list[dict]:
    """The run took the kind's branch, and trained every step that had an informative group (a finite loss, a finite
    nonzero gradient), at least one; on its first `exact_steps` steps (all by default: those whose sampler held the
    weights the trainer scored with) the sampler's log-probs were the trainer's within the kind's bound."""
    import yaml

    cfg = yaml.safe_load((run / "config.yaml").read_text())
    assert (cfg["rollout"]["dtype"], cfg["train"]["autocast"]) == (kind.rollout_dtype, kind.autocast)
    rows = rows_of(run)
    assert [r["step"] for r in rows] == list(range(steps))
    trained = [r for r in rows if r["groups/nonzero_var_frac"] > 0]
    assert trained and all(r["skipped"] == 0 for r in rows)
    for r in trained:
        assert r["loss"] is not None and 0 < r["grad_norm"] < float("inf"), r
        if r["step"] < (steps if exact_steps is None else exact_steps):
            assert r["mismatch/tokens"] > 0 and r["mismatch/k3_kl"] < kind.k3_bound, r
    return rows


@pytest.mark.parametrize(
    "backend, extra",
    [
        ("hf", {"algorithm.beta": 0.04}),  # the reference log-probs (adapter off) under the update's autocast
        ("fast", {"log.eval_every": 1, "log.eval_problems": 4}),  # validation on the fast sampler
        ("fast", {"rollout.max_staleness": 1}),  # sampled ahead, from the weights of the update before
        ("fast", {"model.lora.enabled": False, "train.lr": 1e-3}),  # a full fine-tune: nothing stored in bf16
    ],
    ids=["hf-reference", "fast-validation", "fast-ahead", "fast-full-finetune"],
)
def test_each_local_sampler_trains(tmp_path, tokenizer, kind, backend, extra):
    run = train(
        tiny_config(tmp_path, **AUTO, **{"rollout.backend": backend}, **extra),
        policy=(make_tiny_llama(len(tokenizer)), tokenizer),
        quiet=True,
    )
    # sampled ahead, step 1's rows come from the weights before update 0: their gap is staleness, not numerics
    rows = check_run(run, kind, exact_steps=1 if "rollout.max_staleness" in extra else None)
    if "algorithm.beta" in extra:
        assert all(0 <= r["kl"] < 1 for r in rows)
    if "log.eval_every" in extra:
        assert all(0 <= r["val/accuracy"] <= 1 for r in rows)


def test_the_remote_backend_checks_its_server_and_trains(tmp_path, tokenizer, kind):
    """The issue-64 run: `rollout.backend: remote` with `auto` on a bf16 machine died in the server check (a float32
    forward outside autocast on the bf16-stored base). The stand-in serves the tiny model's float32 log-probs."""
    from standin_vllm import StandinServer, model_scorer

    with StandinServer(scorer=model_scorer(make_tiny_llama(len(tokenizer)))) as server:
        cfg = tiny_config(tmp_path, **AUTO, **{"rollout.backend": "remote", "rollout.urls": f"[{server.url}]"})
        run = train(cfg, policy=(make_tiny_llama(len(tokenizer)), tokenizer), quiet=True)
    # the server's log-probs against the trainer's, at step 0 (the stand-in scores every adapter as the base model:
    # after the first update only the real engine serves the policy; tests/test_engines_vllm.py)
    check_run(run, kind, exact_steps=1)
    # one adapter pushed a step, and one before demo auto's measurement on the start model (the jsonl default)
    assert sum(path == "/v1/load_lora_adapter" for path, _ in server.log) == 3


@pytest.mark.parametrize("family", FAST_FAMILIES)
def test_a_resume_is_exact(tmp_path, tokenizer, kind, family):
    """Two steps, then a third by --resume, against three uninterrupted: the same metrics and the same weights; on each
    family the fast sampler runs (conftest.make_tiny_model), which it samples itself: a fallback to hf is an error."""
    sets = {**AUTO, "rollout.backend": "fast", "train.steps": 3}
    policy = lambda: (make_tiny_model(family, len(tokenizer)), tokenizer)  # noqa: E731
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="rollout.backend=fast does not run")
        full = train(tiny_config(tmp_path / "a", **sets), policy=policy(), quiet=True)
        cfg = tiny_config(tmp_path / "b", **sets)
        short = json.loads(json.dumps(cfg))
        short["train"]["steps"] = 2
        train(short, policy=policy(), quiet=True)
        resumed = train(cfg, resume=True, allow_config_change=True, policy=policy(), quiet=True)
    timing = ("time/", "throughput/")
    a, b = check_run(full, kind, steps=3), check_run(resumed, kind, steps=3)
    assert [{k: v for k, v in r.items() if not k.startswith(timing)} for r in a] == [
        {k: v for k, v in r.items() if not k.startswith(timing)} for r in b
    ]
    wa = load_file(full / "checkpoints" / "step-3" / "trainable.safetensors")
    wb = load_file(resumed / "checkpoints" / "step-3" / "trainable.safetensors")
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


def test_episodes_train_on_the_sampled_ids(tmp_path, model_dir, kind):
    """`retry` episodes from the command line (two attempts, the verdict told between them), on the fast sampler:
    its prefix cache carries the first attempt's keys and values into the second."""
    from conftest import train_two_steps

    data = tiny_config(tmp_path / "data")["task"]["settings"]["path"]
    sets = {
        **AUTO,
        "rollout.backend": "fast",
        "task.name": "jsonl",
        "task.settings": f"{{path: {data}}}",
        "reward.terms": '[{name: first_char, kind: regex, weight: 1.0, pattern: "^\\\\s*(\\\\S)", gold_is_pattern: true}]',
        "episode.environment": "retry",
        "episode.attempts": 2,
        "train.lr": 0.05,
    }
    rows, samples = train_two_steps(model_dir, tmp_path / "run", sets)
    check_run(tmp_path / "run", kind)
    assert all(r["episode/turns"] >= 1 for r in rows) and any(len(s["turn_tokens"]) == 2 for s in samples)


def test_sft_then_evaluation_of_the_run_and_its_checkpoint(tmp_path, tokenizer, model_dir, kind, capsys):
    """SFT on reference traces under the kind's autocast, then `rlvr eval` of the RL run and of its last checkpoint:
    the checkpoint is rebuilt as the trainer built it (its base stored in bf16 under bf16 autocast), so both
    evaluations score the same completions, in the kind's sampler dtype."""
    from rlvr.cli import main
    from rlvr.training.sft import sft

    cfg = tiny_config(tmp_path, **AUTO, **{"rollout.backend": "fast", "model.name": str(model_dir)})
    run = train(cfg, quiet=True)
    check_run(run, kind)
    data = tmp_path / "traces.jsonl"
    data.write_text(
        "".join(
            json.dumps({"id": f"t{i}", "prompt": f"Say {i}.", "answer": "[a-m]", "trace": "a"}) + "\n"
            for i in range(20)
        )
    )
    cfg["task"]["settings"] = {"path": str(data)}
    cfg["sft"].update(source="reference", epochs=2, batch_size=4, lr=1e-2)
    sft_rows = rows_of(sft(cfg, quiet=True))
    assert len(sft_rows) >= 2 and all(0 < r["loss"] < float("inf") and r["grad_norm"] > 0 for r in sft_rows)
    assert sft_rows[-1]["loss"] < sft_rows[0]["loss"]  # the trace's tokens got likelier
    outs = {}
    for name, target in [("run", run), ("checkpoint", run / "checkpoints" / "step-2")]:
        out = tmp_path / f"eval-{name}"
        assert main(["eval", "--model", str(target), "--n", "2", "--limit", "6", "--out", str(out)]) == 0
        summary = json.loads((out / "summary.json").read_text())
        assert summary["setup"]["sampler_dtype"] == kind.rollout_dtype
        outs[name] = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    capsys.readouterr()
    strip = lambda recs: [{k: v for k, v in r.items() if k != "model"} for r in recs]  # noqa: E731
    assert len(outs["run"]) == 6 * 3 and strip(outs["run"]) == strip(outs["checkpoint"])
