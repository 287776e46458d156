"""FSDP2 in the trainer (train.fsdp) on 2 gloo ranks changes nothing but where the weights live: a short run logs
the metrics of the 1-rank unsharded run and saves the same adapter, merged model and checkpoint; a checkpoint
written under FSDP resumes to the uninterrupted run; the sampler's merged weights equal the unsharded ones."""

import copy
import json
import shutil

import pytest
import torch

from conftest import make_tiny_llama
from rlvr.rundir import fsdp
from rlvr.sampling.weights import merged_state_dict
from rlvr.training import distributed
from test_distributed import free_port, launch, train_config

NOT_COMPARED = ("time/", "throughput/")  # wall-clock figures


def _lora_llama():
    """A tiny Llama with a LoRA adapter whose B is non-zero (a fresh B is zero: the merge would be trivial)."""
    from rlvr.policy.load import add_lora

    model = add_lora(make_tiny_llama(64, seed=3), r=4, alpha=8)
    g = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=g) * 0.1)
    return model


def _merged_pairs(comm) -> dict:
    """{kind: (merged weights of the unsharded model, of the same model sharded)}, for a LoRA and a full model."""
    out = {}
    for kind, build in (("lora", _lora_llama), ("full", lambda: make_tiny_llama(64, seed=3))):
        model = build()
        plain = merged_state_dict(copy.deepcopy(model))
        distributed.shard_model(model, distributed.Comm(comm.rank, comm.world))  # shard_model marks its Comm
        assert fsdp.is_sharded(model)
        out[kind] = (plain, merged_state_dict(model))
    return out


def _before_any_step(comm) -> dict:
    """An optimizer that has not stepped, saved and loaded back under FSDP (a checkpoint after a skipped step)."""
    model = make_tiny_llama(64, seed=3)
    distributed.shard_model(model, distributed.Comm(comm.rank, comm.world))
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    saved = fsdp.gather_optimizer(model, opt)
    fresh = torch.optim.AdamW(model.parameters(), lr=0.5)
    fsdp.load_full(model, fresh, {}, comm.all_gather(saved)[0])  # every rank loads what rank 0 wrote
    return {"saved": saved, "states": (len(opt.state), len(fresh.state)), "lr": fresh.param_groups[0]["lr"]}


def _rank_main(rank, out_dir, cfg, tokenizer_dir):
    """One spawn (process start and imports dominate): the merged-weights check, a 2-step FSDP run, then the
    same run resumed from its step-1 checkpoint."""
    from pathlib import Path

    from transformers import AutoTokenizer

    from rlvr.training.loop import train

    out = Path(out_dir)
    comm = distributed.setup()
    torch.save(_merged_pairs(comm), out / f"merged{rank}.pt")
    torch.save(_before_any_step(comm), out / f"empty{rank}.pt")
    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    shard, sharded = distributed.shard_model, []

    def recording_shard(model, comm):  # the real shard_model, noting that the trainer called it
        model = shard(model, comm)
        sharded.append(fsdp.is_sharded(model) and comm.sharded)
        return model

    distributed.shard_model = recording_shard
    train(cfg, policy=(make_tiny_llama(len(tok)), tok), quiet=True)
    if comm.is_main:  # interrupted after step 1: no step-2 checkpoint, no final model
        shutil.copytree(out / "fsdp", out / "resumed")
        shutil.rmtree(out / "resumed" / "checkpoints" / "step-2")
        shutil.rmtree(out / "resumed" / "final")
    comm.barrier()
    cfg = {**cfg, "output_dir": str(out / "resumed")}
    train(cfg, resume=True, allow_config_change=True, policy=(make_tiny_llama(len(tok)), tok), quiet=True)
    (out / f"sharded{rank}.json").write_text(json.dumps(sharded))
    comm.close()


def _task_files(out, tokenizer):
    """The task data (40 prompts, reward 1 when the answer starts with a-d) and the tokenizer, for the ranks."""
    (out / "data.jsonl").write_text(
        "".join(
            json.dumps({"id": f"q{i}", "prompt": f"Say something about {i}.", "answer": "[a-d]"}) + "\n"
            for i in range(40)
        )
    )
    tokenizer.save_pretrained(out / "tok")
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory, tokenizer, server):
    """The folder of the 2-rank FSDP run ("fsdp"), its resumed copy ("resumed"), the 1-rank unsharded run
    ("one") and each rank's merged weights (merged{r}.pt)."""
    from rlvr.training.loop import train

    out = _task_files(tmp_path_factory.mktemp("fsdp"), tokenizer)
    cfg = train_config(out / "fsdp", out / "data.jsonl", server.url)
    cfg["train"]["fsdp"] = True
    launch(_rank_main, free_port(), str(out), cfg, str(out / "tok"))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        train(
            train_config(out / "one", out / "data.jsonl", server.url),
            policy=(make_tiny_llama(len(tokenizer)), tokenizer),
            quiet=True,
        )
    finally:
        torch.set_num_threads(threads)
    return out


def _metrics(run_dir) -> list[dict]:
    return [
        {k: v for k, v in json.loads(x).items() if not k.startswith(NOT_COMPARED)}
        for x in (run_dir / "metrics.jsonl").read_text().splitlines()
    ]


def _close(a: dict, b: dict, tol: float) -> None:
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(b[k], a[k], atol=tol, rtol=tol, msg=k)


@pytest.mark.parametrize("kind", ["lora", "full"])
def test_merged_weights_of_a_sharded_model_equal_the_unsharded_ones(runs, kind):
    for rank in range(2):
        plain, sharded = torch.load(runs / f"merged{rank}.pt")[kind]
        assert not any(hasattr(v, "full_tensor") for v in sharded.values())  # whole plain tensors, on the CPU
        assert all(v.device.type == "cpu" for v in sharded.values())
        _close(plain, sharded, 1e-6)
    if kind == "lora":  # the adapter was merged in: q_proj moved off the base weight by B A * alpha / r
        base = make_tiny_llama(64, seed=3).state_dict()["model.layers.0.self_attn.q_proj.weight"]
        assert (plain["model.layers.0.self_attn.q_proj.weight"] - base).abs().max() > 1e-3


def test_optimizer_state_before_any_step_round_trips(runs):
    """Nothing to gather: saved as torch saves it, without the zero-lr step torch's sharded API would take."""
    for rank in range(2):
        r = torch.load(runs / f"empty{rank}.pt", weights_only=False)
        assert r["states"] == (0, 0) and r["lr"] == 0.1
        if rank == 0:
            assert r["saved"]["state"] == {} and r["saved"]["param_groups"][0]["lr"] == 0.1
            assert r["saved"]["param_groups"][0]["params"] == list(range(len(r["saved"]["param_groups"][0]["params"])))
        else:
            assert r["saved"] == {}


def test_fsdp_run_logs_the_one_rank_metrics(runs):
    for rank in range(2):  # both runs (uninterrupted, resumed) sharded the policy on both ranks
        assert json.loads((runs / f"sharded{rank}.json").read_text()) == [True, True]
    one, two = _metrics(runs / "one"), _metrics(runs / "fsdp")
    assert [r["step"] for r in two] == [0, 1]
    for a, b in zip(one, two):
        assert a.keys() == b.keys()
        for key in a:
            assert b[key] == pytest.approx(a[key], rel=1e-5, abs=1e-6), key
    assert (runs / "one" / "samples.jsonl").read_text() == (runs / "fsdp" / "samples.jsonl").read_text()


def test_fsdp_run_saves_the_one_rank_adapter_model_and_checkpoint(runs):
    """Same files as the unsharded run (adapter, merged model, checkpoint in the same format), same values to
    1e-4 (AdamW magnifies summation-order rounding on near-zero gradients; see test_distributed)."""
    from safetensors.torch import load_file

    files = [
        "final/adapter/adapter_model.safetensors",
        "final/merged/model.safetensors",
        "checkpoints/step-2/trainable.safetensors",
    ]
    for name in files:
        a, b = load_file(runs / "one" / name), load_file(runs / "fsdp" / name)
        _close(a, b, 1e-4)
    lora_b = load_file(runs / "fsdp" / files[0])
    assert any(v.abs().max() > 0 for k, v in lora_b.items() if "lora_B" in k)  # the adapter did train
    assert json.loads((runs / "fsdp" / "final/adapter/adapter_config.json").read_text())["r"] == 4
    oa, ob = (
        torch.load(runs / n / "checkpoints/step-2/optim.pt", weights_only=False)["optimizer"] for n in ("one", "fsdp")
    )
    assert ob["param_groups"] == oa["param_groups"]  # integer ids in the same order, same hyper-parameters
    assert ob["state"].keys() == oa["state"].keys()
    for i, s in oa["state"].items():
        _close(s, ob["state"][i], 1e-4)
    assert float(oa["state"][0]["step"]) == 2.0


def test_fsdp_checkpoint_resumes_to_the_uninterrupted_run(runs):
    from safetensors.torch import load_file

    assert _metrics(runs / "resumed") == _metrics(runs / "fsdp")
    for name in ("final/adapter/adapter_model.safetensors", "checkpoints/step-2/trainable.safetensors"):
        _close(load_file(runs / "fsdp" / name), load_file(runs / "resumed" / name), 1e-6)


def test_fsdp_on_one_rank_is_a_no_op(tiny_policy, tmp_path):
    """train.fsdp with a world of one: the model stays whole (nothing to shard over) and trains as usual."""
    from rlvr.config import resolve
    from rlvr.training.step import check_components, setup

    parts = check_components(resolve(None, ["train.fsdp=true", "model.lora.r=4", f"output_dir={tmp_path}"]))
    model = setup(parts, tiny_policy, distributed.Comm()).model
    assert not fsdp.is_sharded(model)
    assert not any(hasattr(p, "full_tensor") for p in model.parameters())


@pytest.mark.parametrize("value,ok", [("true", True), ("false", True), ("1", False), ("yes please", False)])
def test_fsdp_key_is_a_bool(value, ok):
    from rlvr.config import ConfigError, resolve

    if ok:
        assert resolve(None, [f"train.fsdp={value}"])["train"]["fsdp"] is (value == "true")
    else:
        with pytest.raises(ConfigError, match="train.fsdp"):
            resolve(None, [f"train.fsdp={value}"])


def _train_each(rank, cfgs, tokenizer_dir):
    from transformers import AutoTokenizer

    from rlvr.training.loop import train

    comm = distributed.setup()
    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    for cfg in cfgs:
        train(cfg, policy=(make_tiny_llama(len(tok)), tok), quiet=True)
    comm.close()


@pytest.mark.slow
def test_fsdp_full_fine_tune_with_local_sampler_and_kl_matches_data_parallel(tmp_path, tokenizer):
    """A full fine-tune (no LoRA) with a KL reference and the local `hf` sampler, on 2 ranks: sharded and
    data-parallel runs sample the same completions (each rank's sampler loads the gathered merged weights) and
    take the same step. One step: later steps sample with bf16-rounded weights, where 1e-7 apart can flip a token."""
    from safetensors.torch import load_file

    out = _task_files(tmp_path, tokenizer)
    cfgs = []
    for name in ("dp", "fsdp"):  # the task and reward of train_config; its rollout server is not used
        cfg = train_config(out / name, out / "data.jsonl", "http://127.0.0.1:1")
        cfg["algorithm"] = {"preset": "grpo", "beta": 0.04}
        cfg["model"]["lora"]["enabled"] = False
        cfg["rollout"].update(backend="hf", urls=[], max_new_tokens=6)
        cfg["train"].update(steps=1, lr=1e-3, fsdp=name == "fsdp")
        cfgs.append(cfg)
    launch(_train_each, free_port(), cfgs, str(out / "tok"))
    assert (out / "dp" / "samples.jsonl").read_text() == (out / "fsdp" / "samples.jsonl").read_text()
    for a, b in zip(_metrics(out / "dp"), _metrics(out / "fsdp")):
        assert a.keys() == b.keys() and a["kl"] >= 0
        for key in a:
            assert b[key] == pytest.approx(a[key], rel=1e-5, abs=1e-6), key
    merged = load_file(out / "fsdp/final/merged/model.safetensors")
    _close(load_file(out / "dp/final/merged/model.safetensors"), merged, 1e-4)
    start = make_tiny_llama(len(tokenizer)).state_dict()["model.layers.0.mlp.up_proj.weight"]
    assert (merged["model.layers.0.mlp.up_proj.weight"] - start).abs().max() > 1e-4  # the step moved the weights
    _close(
        load_file(out / "dp/checkpoints/step-1/trainable.safetensors"),
        load_file(out / "fsdp/checkpoints/step-1/trainable.safetensors"),
        1e-4,
    )
