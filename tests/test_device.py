"""model.device: where the trainer's policy lives. What can be checked without a GPU: the choice, the refusal of a
GPU that is not there (one line, exit 2, before a model or a run directory), autocast on the model's device type,
the device boundary's log-probs coming back to the batch's device, and a checkpoint's tensors and optimizer state
readable on the CPU. The same parts on a real GPU against the CPU: benchmarks/gpu_cuda_check.py (docs/scaling.md,
"The GPU check")."""

import os

import pytest
import torch

from conftest import make_tiny_llama
from rlvr.cli import main
from rlvr.config import ConfigError, as_config, resolve
from rlvr.policy.build import build_policy, policy_device
from rlvr.policy.logprobs import PromptPass, autocast, completion_logprobs
from rlvr.rundir.checkpoint import load_checkpoint, save_checkpoint, trainable_state

NO_GPU = pytest.mark.skipif(torch.cuda.is_available(), reason="asserts what a machine without CUDA does")


def test_cpu_is_the_cpu_and_auto_is_the_cpu_without_cuda():
    assert policy_device("cpu") == torch.device("cpu")
    if not torch.cuda.is_available():
        assert policy_device("auto") == torch.device("cpu")


@NO_GPU
def test_the_cpu_suite_hides_cuda_from_auto(pytestconfig):
    """conftest.pytest_configure: a run that does not ask for the gpu tests sees no CUDA device, so `auto` is the
    CPU here even on a GPU machine (and the rlvr commands tests start inherit it)."""
    assert "not gpu" in pytestconfig.getoption("markexpr")
    assert os.environ["CUDA_VISIBLE_DEVICES"] == ""
    assert not torch.cuda.is_available() and policy_device("auto") == torch.device("cpu")


def test_cuda_without_a_gpu_is_one_clear_refusal():
    with pytest.raises(
        ConfigError, match=r"^model.device = 'cuda' but torch .* sees no CUDA device \(built for CUDA: "
    ):
        policy_device("cuda")


@NO_GPU
@pytest.mark.parametrize("command", ["train", "sft"])
def test_rlvr_train_and_sft_refuse_a_missing_gpu_before_the_model_and_the_run_directory(tmp_path, capsys, command):
    run = tmp_path / "run"
    sets = ["model.name=/nonexistent/model-folder", "model.device=cuda", f"output_dir={run}", f"sft.output_dir={run}"]
    assert main([command, "default", *sum((["--set", s] for s in sets), [])]) == 2
    err = capsys.readouterr().err.strip()
    assert "model.device = 'cuda' but torch" in err and "\n" not in err and "nonexistent" not in err
    assert not run.exists()


def test_a_config_refuses_a_device_that_is_no_choice():
    with pytest.raises(ConfigError, match=r"config key 'model.device' = 'tpu'; choose from auto, cpu, cuda"):
        resolve(None, ["model.device=tpu"])


def test_autocast_follows_the_model_and_the_setting():
    model = make_tiny_llama(64)
    with autocast(model, "bfloat16"):
        assert torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == torch.bfloat16
    with autocast(model, "none"):
        assert not torch.is_autocast_enabled("cpu")


def test_log_probs_come_back_to_the_batch_and_match_between_the_two_forwards():
    """Both forwards (the update's prompt pass and the plain one) give the same log-probs, on the completions'
    device, and a gradient reaches the model through the copy back."""
    model = make_tiny_llama(64, seed=1)
    prompts = [[5, 6, 7], [8, 9]]
    ids = torch.tensor([[10, 11, 12], [13, 14, 0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    plain, _ = completion_logprobs(model, prompts, ids, mask, pad_id=0)
    passed = PromptPass(model, prompts, pad_id=0).logprobs(model, prompts, ids, mask)
    assert plain.device == ids.device and passed.device == ids.device
    assert torch.allclose(plain, passed, atol=1e-5) and plain[1, 2] == 0.0
    plain.sum().backward()
    assert model.model.embed_tokens.weight.grad.abs().sum() > 0


def test_the_policy_is_built_on_its_device_with_the_same_adapter_for_a_seed(tmp_path, tokenizer):
    cfg = as_config(resolve(None, [f"output_dir={tmp_path}", "model.device=cpu", "model.lora.r=4"]))
    a, _ = build_policy(cfg, (make_tiny_llama(len(tokenizer)), tokenizer))
    b, _ = build_policy(cfg, (make_tiny_llama(len(tokenizer)), tokenizer))
    assert {p.device.type for p in a.parameters()} == {"cpu"}
    lora = [n for n, _ in a.named_parameters() if "lora_A" in n]
    assert lora and all(torch.equal(dict(a.named_parameters())[n], dict(b.named_parameters())[n]) for n in lora)


def test_a_checkpoint_holds_copies_and_loads_its_optimizer_onto_the_parameters(tmp_path):
    """trainable_state copies (a later step cannot change what was saved); load_checkpoint reads optim.pt onto the
    CPU and lets the optimizer put its state where each parameter is."""
    model = make_tiny_llama(64)
    model.requires_grad_(False)
    head = model.model.embed_tokens.weight.requires_grad_(True)
    opt = torch.optim.AdamW([head], lr=0.1)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    head.sum().backward()
    opt.step()
    saved = trainable_state(model)
    assert saved["model.embed_tokens.weight"].data_ptr() != head.data_ptr()
    path = save_checkpoint(tmp_path, 1, model=model, optimizer=opt, scheduler=sched, loop_state={"step": 1})
    before = head.detach().clone()
    with torch.no_grad():
        head.add_(1.0)
    assert torch.equal(saved["model.embed_tokens.weight"], before)
    fresh = torch.optim.AdamW([head], lr=0.1)
    assert load_checkpoint(path, model=model, optimizer=fresh, scheduler=sched) == {"step": 1}
    assert torch.equal(head.detach(), before)
    state = fresh.state_dict()["state"][0]
    assert state["exp_avg"].device == head.device and state["exp_avg"].abs().sum() > 0


def test_rlvr_eval_takes_model_device_and_refuses_other_model_keys():
    from rlvr.cli.eval import parse_overrides

    assert parse_overrides(["model.device=cpu", "rollout.dtype=float32"]) == (
        {},
        ["model.device=cpu", "rollout.dtype=float32"],
    )
    with pytest.raises(
        ConfigError, match=r"^--set 'model.name=x': rlvr eval takes task.settings.\*, reward.\*, rollout.\*"
    ):
        parse_overrides(["model.name=x"])


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("case", ["grpo", "dapo", "gspo", "grpo_kl", "grpo_mu2"])
def test_the_update_on_a_gpu_is_the_cpus_to_float32_rounding(case):
    """One update of tests/test_distributed.py's cases with the tiny model on the GPU and on the CPU (float32): loss,
    gradient norm and weights agree to rounding (on an H200: 3.9e-08, 2.4e-07 and 3.0e-08 at worst over the eight
    cases, benchmarks/gpu_cuda_check.py's `update parity`)."""
    from test_distributed import CASES, run_case

    one = next(c for c in CASES if c[0] == case)
    (cs, cw), (gs, gw) = run_case(one), run_case(one, device="cuda")
    assert gs["loss"] == pytest.approx(cs["loss"], rel=1e-4, abs=1e-7)
    assert gs["grad_norm"] == pytest.approx(cs["grad_norm"], rel=1e-4)
    assert max(float((gw[k] - w).abs().max()) for k, w in cw.items()) < 1e-5
