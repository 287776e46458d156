"""Rollouts sampled ahead (rollout.max_staleness, rlvr.training.ahead) on a tiny random Llama: the schedule's
staleness exactly, no row older than k trained on (a forced stale group dropped and counted), a resume that equals
the uninterrupted run, and k = 0 writing nothing new."""

import json
import threading

import pytest
import torch

from conftest import make_tiny_llama
from rlvr.config import Config, ConfigError, resolve
from rlvr.training import ahead, step
from rlvr.training.comm import Comm
from rlvr.training.loop import train
from test_trainer import tiny_config

ASYNC_KEYS = ["async/staleness_mean", "async/staleness_max", "async/stale_rows", "time/wait_rollouts_s"]


def lines(run) -> list[dict]:
    return [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]


def samples(run, at: int) -> list[dict]:
    return [r for r in map(json.loads, (run / "samples.jsonl").read_text().splitlines()) if r["step"] == at]


def same_figures(row: dict) -> dict:
    return {k: v for k, v in row.items() if not k.startswith(("time/", "throughput/", "async/"))}


@pytest.fixture
def trained_versions(monkeypatch):
    """The versions of the rows each update saw, step by step (update_policy spied on)."""
    seen = []
    real = step.update_policy

    def spy(model, optimizer, batch, *args, **kwargs):
        seen.append(batch.versions.tolist())
        return real(model, optimizer, batch, *args, **kwargs)

    monkeypatch.setattr(step, "update_policy", spy)
    return seen


@pytest.mark.parametrize("k, expected", [(1, [0, 1, 1, 1]), (2, [0, 1, 2, 2])])
def test_batch_s_is_sampled_from_version_s_minus_k(tmp_path, tokenizer, trained_versions, k, expected):
    run = train(
        tiny_config(tmp_path, **{"train.steps": 4, "rollout.max_staleness": k}),
        policy=(make_tiny_llama(len(tokenizer)), tokenizer),
        quiet=True,
    )
    rows = lines(run)
    # 2 prompts x 4 samples a step, every row of step s from version max(0, s - k): staleness min(s, k)
    assert [r["async/staleness_mean"] for r in rows] == expected
    assert [r["async/staleness_max"] for r in rows] == expected
    assert [r["async/stale_rows"] for r in rows] == [0, 0, 0, 0]
    assert trained_versions == [[max(0, s - k)] * 8 for s in range(4)]
    assert all(r["time/wait_rollouts_s"] >= 0 and r["time/wait_weights_s"] >= 0 for r in rows)
    assert (run / "checkpoints" / "step-4" / ahead.AHEAD_FILE).exists()


def test_k0_writes_nothing_new_and_k1_starts_as_it_does(tmp_path, tokenizer):
    """Step 0 samples the start weights either way: the same rows, figures and update."""
    runs = {
        k: train(
            tiny_config(tmp_path / f"k{k}", **{"train.steps": 2, "rollout.max_staleness": k}),
            policy=(make_tiny_llama(len(tokenizer)), tokenizer),
            quiet=True,
        )
        for k in (0, 1)
    }
    sync, ahead_rows = lines(runs[0]), lines(runs[1])
    assert not [key for row in sync for key in row if key.startswith("async/") or key.startswith("time/wait_")]
    assert not (runs[0] / "checkpoints" / "step-2" / ahead.AHEAD_FILE).exists()
    assert same_figures(sync[0]) == same_figures(ahead_rows[0])
    assert samples(runs[0], 0) == samples(runs[1], 0)
    assert same_figures(sync[1]) != same_figures(ahead_rows[1])  # step 1: version 1 vs version 0


def test_a_row_older_than_k_is_dropped_and_counted(tmp_path, tokenizer, trained_versions, monkeypatch):
    real = ahead.Ahead._sample

    def with_a_stale_group(self, at, version, weights):  # step 2's first group claims version -10
        batch = real(self, at, version, weights)
        if at == 2:
            batch.versions[:4] = -10
        return batch

    monkeypatch.setattr(ahead.Ahead, "_sample", with_a_stale_group)
    run = train(
        tiny_config(tmp_path, **{"train.steps": 3, "rollout.max_staleness": 1}),
        policy=(make_tiny_llama(len(tokenizer)), tokenizer),
        quiet=True,
    )
    row = lines(run)[2]
    assert row["async/stale_rows"] == 4 and row["async/staleness_max"] == 12
    assert row["async/staleness_mean"] == (4 * 12 + 4 * 1) / 8  # over every row generated for the step
    assert row["dynamic_sampling/kept_groups"] == 1
    assert trained_versions[2] == [1, 1, 1, 1]  # the loss saw the other group only


def test_the_loss_corrects_with_the_older_weights_log_probs(tmp_path, tokenizer):
    """float32 sampling: the sampler and the trainer agree to 1e-6 on the same weights (step 0), so the gap at steps
    1 and 2 (sampled by the version before) is staleness, and the truncated correction weights the tokens by it."""
    over = {"algorithm": "{preset: grpo, rollout_correction: truncated}", "rollout.dtype": "float32"}
    run = train(
        tiny_config(tmp_path, **{"train.steps": 3, "rollout.max_staleness": 1, **over}),
        policy=(make_tiny_llama(len(tokenizer)), tokenizer),
        quiet=True,
    )
    rows = lines(run)
    assert rows[0]["mismatch/abs_log_ratio"] < 1e-5 and rows[0]["correction/weight_mean"] == pytest.approx(1, abs=1e-5)
    for row in rows[1:]:
        assert row["mismatch/abs_log_ratio"] > 1e-2 and abs(row["correction/weight_mean"] - 1) > 1e-3


def test_a_run_ended_by_its_time_budget_stops_the_sampling_thread(tmp_path, tokenizer):
    """The budget ends the run at step 1 while the thread samples the batch of step 2: it finishes that batch, stops,
    and the final checkpoint still holds the versions a resume needs."""
    run = train(
        tiny_config(tmp_path, **{"train.steps": 50, "train.time_budget_min": 1e-6, "rollout.max_staleness": 1}),
        policy=(make_tiny_llama(len(tokenizer)), tokenizer),
        quiet=True,
    )
    assert [r["step"] for r in lines(run)] == [0, 1]
    from safetensors.torch import load_file

    saved = load_file(run / "checkpoints" / "step-2" / ahead.AHEAD_FILE)  # batch 2 samples version 1
    assert sorted({key.split("/")[0] for key in saved}) == ["1"]
    assert ahead.THREAD_NAME not in [t.name for t in threading.enumerate()]


def test_drop_stale_keeps_the_fresh_rows_with_their_advantages():
    from rlvr.training.batch import StepBatch

    b = 4
    batch = StepBatch(
        problems=list("abcd"),
        prompt_ids=[[1]] * b,
        completion_ids=torch.arange(8).view(b, 2),
        mask=torch.ones(b, 2),
        sampler_logp=torch.zeros(b, 2),
        group_ids=torch.tensor([0, 0, 1, 1]),
        lengths=torch.full((b,), 2),
        finish=["stop"] * b,
        texts=list("abcd"),
        verdicts=[None] * b,
        rewards=torch.tensor([0.0, 1.0, 1.0, 0.0]),
        terms={},
        advantages=torch.tensor([-0.5, 0.5, 0.7, -0.7]),
        versions=torch.tensor([3, 3, 1, 1]),
    )
    kept, dropped = ahead.drop_stale(batch, 5, 2)  # version 1 is 4 updates before step 5: older than k = 2
    assert dropped == 2 and kept.problems == ["a", "b"] and kept.advantages.tolist() == [-0.5, 0.5]
    assert kept.all_generated is batch and kept.versions.tolist() == [3, 3]
    assert ahead.drop_stale(batch, 3, 2) == (batch, 0)


@pytest.mark.parametrize(
    "k, extra",
    [
        (1, {}),
        (2, {"curriculum": "{kind: adaptive, floor: 0.1}", "log.eval_every": 1, "log.eval_problems": 4}),
    ],
)
def test_resume_continues_exactly(tmp_path, tokenizer, k, extra):
    over = {"train.steps": 4, "rollout.max_staleness": k, **extra}
    full = train(tiny_config(tmp_path / "a", **over), policy=(make_tiny_llama(len(tokenizer)), tokenizer), quiet=True)
    cfg = tiny_config(tmp_path / "b", **over)
    short = json.loads(json.dumps(cfg))
    short["train"]["steps"] = 2  # stopped after step 1: batches 2 .. 1 + k sample versions max(0, 2 - k) .. 1
    train(short, policy=(make_tiny_llama(len(tokenizer)), tokenizer), quiet=True)
    resumed = train(
        cfg, resume=True, allow_config_change=True, policy=(make_tiny_llama(len(tokenizer)), tokenizer), quiet=True
    )
    a, b = lines(full), lines(resumed)
    assert [same_figures(r) for r in a] == [same_figures(r) for r in b]
    assert [r["async/staleness_max"] for r in b] == [min(s, k) for s in range(4)]
    assert samples(full, 3) == samples(resumed, 3)
    if extra:
        assert all("val/accuracy" in r for r in a) and "band/easy/share" in a[0]
    from safetensors.torch import load_file

    wa = load_file(full / "checkpoints" / "step-4" / "trainable.safetensors")
    wb = load_file(resumed / "checkpoints" / "step-4" / "trainable.safetensors")
    assert wa.keys() == wb.keys() and all(torch.equal(wa[x], wb[x]) for x in wa)


def test_max_staleness_is_a_count_of_updates_on_one_rank():
    with pytest.raises(ConfigError, match=r"^config key 'rollout.max_staleness' = -1; must be >= 0$"):
        resolve(None, ["rollout.max_staleness=-1"])
    cfg = Config.from_dict(resolve(None, ["rollout.max_staleness=2"]))
    message = (
        "rollout.max_staleness=2 runs on one rank, not 2: set it to 0 under torchrun "
        "(the sampling thread's collectives would interleave with the trainer's)"
    )
    with pytest.raises(ConfigError) as e:
        ahead.check(cfg, Comm(0, 2))
    assert str(e.value) == message
    ahead.check(cfg, Comm())
