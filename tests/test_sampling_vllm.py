"""Backend "vllm": the parts that need no vLLM (engine and sampling arguments, vLLM outputs -> Rollouts with
stop cutting and log-probs, adapter naming per sync, the engine folder, the errors when vLLM is missing or
old), and one `gpu` test of the real engine where vLLM and CUDA exist.

`RequestOutput` / `CompletionOutput` / `Logprob` below are small stand-ins shaped like vLLM's output types
(the attributes rows_from_outputs reads), since vLLM itself is not installed here."""

import gc
import importlib.util
import math
import sys
import types
from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest
import torch

from conftest import make_tiny_llama
from rlvr.config import Config, ConfigError, resolve
from rlvr.sampling import backend_settings, make_sampler
from rlvr.sampling import vllm as vb
from rlvr.sampling.rollouts import pack_rollouts


@dataclass
class Logprob:
    logprob: float
    rank: int = 1


@dataclass
class CompletionOutput:
    index: int
    token_ids: list
    logprobs: list | None
    finish_reason: str


@dataclass
class RequestOutput:
    outputs: list = field(default_factory=list)


def completion(index, tokens, finish, lp=lambda t: -0.01 * t):
    """A completion whose log-prob at token t is lp(t); each position's map also holds a decoy entry."""
    return CompletionOutput(
        index, list(tokens), [{t: Logprob(lp(t)), t + 1000: Logprob(-99.0)} for t in tokens], finish
    )


STOP = 2


def test_importing_the_backend_does_not_import_vllm():
    before = "vllm" in sys.modules
    import rlvr.sampling.vllm  # noqa: F401
    import rlvr_bench.vllm  # noqa: F401

    assert ("vllm" in sys.modules) == before


@pytest.mark.parametrize("top_k, sent", [(0, 0), (-1, 0), (5, 5)])
def test_sampling_kwargs(top_k, sent):
    kw = vb.sampling_kwargs(8, max_new_tokens=128, temperature=0.7, top_p=0.9, top_k=top_k, seed=41, stop_ids=[2, 7])
    assert kw == {
        "n": 8,
        "max_tokens": 128,
        "temperature": 0.7,
        "top_p": 0.9,
        "top_k": sent,
        "min_p": 0.0,
        "repetition_penalty": 1.0,
        "seed": 41,
        "logprobs": 0,
        "stop_token_ids": [2, 7],
        "detokenize": False,
    }


@pytest.mark.parametrize("r, slot", [(1, 8), (8, 8), (12, 16), (16, 16), (100, 128), (512, 512)])
def test_lora_rank_slot(r, slot):
    assert vb.lora_rank_slot(r) == slot


def test_lora_rank_above_vllm_limit_is_refused():
    with pytest.raises(ValueError, match="512"):
        vb.lora_rank_slot(513)


def test_engine_kwargs_full_and_lora():
    full = vb.engine_kwargs("/m", dtype="bfloat16", gpu_memory_utilization=0.3, enforce_eager=True, max_model_len=0)
    assert full["logprobs_mode"] == "processed_logprobs"  # log-probs after the temperature: our contract
    assert (full["model"], full["gpu_memory_utilization"], full["enforce_eager"]) == ("/m", 0.3, True)
    assert "max_model_len" not in full and "enable_lora" not in full
    lora = vb.engine_kwargs(
        "/m", dtype="auto", gpu_memory_utilization=0.5, enforce_eager=False, max_model_len=1024, lora_rank=12
    )
    assert (lora["max_model_len"], lora["enable_lora"], lora["max_lora_rank"], lora["max_loras"]) == (1024, True, 16, 1)


@pytest.mark.parametrize("util", [0.0, -0.1, 1.5])
def test_engine_kwargs_refuses_a_bad_memory_fraction(util):
    with pytest.raises(ValueError, match="gpu_memory_utilization"):
        vb.engine_kwargs("/m", dtype="auto", gpu_memory_utilization=util, enforce_eager=False, max_model_len=0)


@pytest.mark.parametrize(
    "text, parsed",
    [
        ("0.10.2", (0, 10, 2)),
        ("0.10.2rc1+cu128", (0, 10, 2)),
        ("0.11.0.dev12", (0, 11, 0)),
        ("1.0", (1, 0)),
        ("dev", (0,)),
    ],
)
def test_parse_version(text, parsed):
    assert vb.parse_version(text) == parsed


@pytest.mark.parametrize(
    "temperature, top_p, top_k, gap",
    [
        (1.0, 1.0, 0, False),
        (0.6, 1.0, 0, False),  # processed log-probs = log softmax(logits / T)
        (0.0, 0.9, 20, False),  # greedy: untempered log softmax on both sides
        (1.0, 0.9, 0, True),
        (0.7, 1.0, 50, True),  # truncation: vLLM renormalises over the kept tokens
    ],
)
def test_logprob_gap(temperature, top_p, top_k, gap):
    assert (vb.logprob_gap(temperature, top_p, top_k) is not None) == gap


def test_rows_from_outputs_cuts_at_stop_and_keeps_the_sampled_logprobs(tokenizer):
    # prompt 0: completions arrive out of index order; #0 ends on the stop id, #1 runs to max_new_tokens.
    # prompt 1: #0 carries tokens past a stop id (cut there, stop kept); #1 is longer than max_new_tokens.
    outputs = [
        RequestOutput([completion(1, [5, 6, 7, 8], "length"), completion(0, [3, 4, STOP], "stop")]),
        RequestOutput([completion(0, [9, STOP, 11], "stop"), completion(1, [12, 13, 14, 15, 16], "length")]),
    ]
    rows, logps, finish = vb.rows_from_outputs(outputs, 2, 4, [STOP])
    assert rows == [[3, 4, STOP], [5, 6, 7, 8], [9, STOP], [12, 13, 14, 15]]
    assert finish == ["stop", "length", "stop", "length"]
    assert logps[0] == pytest.approx([-0.03, -0.04, -0.02])  # the sampled token's entry, never the decoy
    ro = pack_rollouts([[1, 1], [1, 1, 1]], 2, rows, logps, finish, tokenizer.pad_token_id, tokenizer)
    assert ro.completion_ids.shape == (4, 4)
    assert ro.mask.sum(dim=1).tolist() == [3.0, 4.0, 2.0, 4.0]
    assert ro.num_generated_tokens == 13
    assert ro.group_ids.tolist() == [0, 0, 1, 1]
    assert ro.sampler_logp[2].tolist() == pytest.approx([-0.09, -0.02, 0.0, 0.0])  # 0 on padding
    assert ro.sampler_logp.dtype == torch.float32


def test_finish_reason_stop_without_our_stop_id_counts_as_stop():
    # vLLM stopped on an end token of its own (e.g. from the checkpoint): a stop, though not one of ours
    rows, _, finish = vb.rows_from_outputs([RequestOutput([completion(0, [3, 4], "stop")])], 1, 8, [STOP])
    assert (rows, finish) == ([[3, 4]], ["stop"])


def test_rows_from_outputs_refuses_a_wrong_sample_count_or_missing_logprobs():
    with pytest.raises(RuntimeError, match="expected 2"):
        vb.rows_from_outputs([RequestOutput([completion(0, [3], "length")])], 2, 4, [STOP])
    with pytest.raises(RuntimeError, match="log-prob"):
        vb.rows_from_outputs([RequestOutput([CompletionOutput(0, [3, 4], None, "length")])], 1, 4, [STOP])


def test_adapter_request_names_a_new_adapter_each_sync(tmp_path):
    requests = [vb.adapter_request(v, tmp_path) for v in (1, 2, 3)]
    assert requests[0] == ("rlvr-policy-1", 1, str(tmp_path / "rlvr-policy-1"))
    assert len({r[0] for r in requests}) == len({r[1] for r in requests}) == 3  # names and ids never repeat
    with pytest.raises(ValueError):
        vb.adapter_request(0, tmp_path)  # vLLM reserves id 0


def test_missing_vllm_names_the_install_command(tiny_policy, monkeypatch):
    model, tok = tiny_policy
    monkeypatch.setitem(sys.modules, "vllm", None)  # `import vllm` raises ImportError, installed or not
    with pytest.raises(vb.VLLMMissing, match=r'pip install "rlvr\[vllm\]"'):
        make_sampler("vllm", model, tok, stop_ids=[tok.eos_token_id])


def test_old_vllm_is_refused(tiny_policy, monkeypatch):
    model, tok = tiny_policy
    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(__version__="0.9.2"))
    with pytest.raises(vb.VLLMMissing, match="0.9.2 is too old"):
        make_sampler("vllm", model, tok, stop_ids=[tok.eos_token_id])


@pytest.mark.parametrize("sync, why", [("lora", "LoRA adapter"), ("merged", "weight_sync")])
def test_bad_weight_sync_is_refused_before_vllm_is_needed(tiny_policy, sync, why):
    model, tok = tiny_policy  # a plain model: nothing to push in "lora" mode
    with pytest.raises(ValueError, match=why):
        make_sampler("vllm", model, tok, stop_ids=[tok.eos_token_id], weight_sync=sync)


def test_config_section_reaches_make_sampler():
    cfg = resolve(
        None, ["rollout.backend=vllm", "rollout.vllm.weight_sync=lora", "rollout.vllm.gpu_memory_utilization=0.4"]
    )
    want = {
        "gpu_memory_utilization": 0.4,
        "engine_dtype": "bfloat16",
        "enforce_eager": False,
        "max_model_len": 0,
        "weight_sync": "lora",
    }
    assert backend_settings(cfg["rollout"]) == want
    assert backend_settings(Config.from_dict(cfg).rollout) == want
    assert backend_settings({"backend": "fast"}) == {}
    with pytest.raises(ConfigError, match="weight_sync"):
        resolve(None, ["rollout.vllm.weight_sync=weights"])


def test_engine_folder_holds_the_base_weights_not_the_merged_ones(tokenizer, tmp_path):
    from peft import LoraConfig, get_peft_model
    from safetensors.torch import load_file

    base = make_tiny_llama(len(tokenizer), seed=3)
    reference = {k: v.clone() for k, v in base.state_dict().items()}
    model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    for name, p in model.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(p)  # a trained adapter: merging it would change q_proj / v_proj
    folder = vb.write_engine_folder(model, tokenizer, tmp_path / "engine")
    saved = load_file(str(folder / "model.safetensors"))
    assert "lm_head.weight" not in saved  # tied to the embedding
    assert set(saved) == set(reference) - {"lm_head.weight"}
    for k, v in saved.items():
        assert torch.equal(v, reference[k]), k
    assert (folder / "config.json").is_file() and (folder / "tokenizer_config.json").is_file()
    assert vb.own_folder(model) is None  # built in memory: no folder of its own
    assert vb.own_folder(SimpleNamespace(name_or_path=str(folder))) == str(folder)


# ---- the real engine: needs vLLM and a CUDA GPU (benchmarks/gpu_check.sh runs this) ------------------

needs_gpu = pytest.mark.skipif(
    importlib.util.find_spec("vllm") is None or not torch.cuda.is_available(), reason="needs vLLM and a CUDA GPU"
)


def _hf_logp(model, prompt, completion_ids, temperature):
    """log softmax(logits / T) of the policy at each completion token (the Rollouts contract), float32."""
    ids = torch.tensor([prompt + completion_ids], device=model.device)
    with torch.no_grad():
        logits = model(ids).logits[0, len(prompt) - 1 : -1].float() / temperature
    return logits.log_softmax(-1).gather(-1, ids[0, len(prompt) :, None]).squeeze(-1).cpu()


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("weight_sync", ["full", "lora"])
def test_real_engine_matches_the_policy_and_follows_sync(weight_sync):
    from rlvr.policy.load import add_lora, load_policy

    model, tok = load_policy("smollm2-135m-instruct", "float32")
    model = model.cuda().eval()
    if weight_sync == "lora":
        model = add_lora(model, r=8, alpha=16)
    stops = [tok.eos_token_id]
    sampler = make_sampler(
        "vllm",
        model,
        tok,
        stop_ids=stops,
        weight_sync=weight_sync,
        enforce_eager=True,
        gpu_memory_utilization=0.25,
        max_model_len=1024,
    )
    prompts = [tok("The capital of France is")["input_ids"], tok("1 + 1 =")["input_ids"]]
    gen = torch.Generator().manual_seed(0)
    ro = sampler.generate(prompts, 4, max_new_tokens=16, temperature=0.8, generator=gen)
    assert ro.completion_ids.shape[0] == 8 and ro.completion_ids.shape[1] <= 16
    assert ro.num_generated_tokens == int(ro.mask.sum()) > 0
    for b in (0, 5):  # the engine's log-probs are the policy's log softmax(logits / T), up to bf16 noise
        n = int(ro.mask[b].sum())
        ours = _hf_logp(model, prompts[b // 4], ro.completion_ids[b, :n].tolist(), 0.8)
        assert torch.allclose(ro.sampler_logp[b, :n], ours, atol=0.15), (ro.sampler_logp[b, :n], ours)
    # Change the policy so that its next-token distribution is known by hand, sync, and sample again.
    with torch.no_grad():
        if weight_sync == "full":  # final norm weight 0 -> hidden state 0 -> every logit 0 -> uniform
            model.model.norm.weight.zero_()
            expected = -math.log(model.config.vocab_size)
        else:  # a large LoRA delta changes the distribution; compare with the policy directly
            for name, p in model.named_parameters():
                if "lora_B" in name:
                    p.normal_(std=0.05)
            expected = None
    sampler.sync(model)
    ro = sampler.generate(prompts, 4, max_new_tokens=8, temperature=1.0, generator=gen)
    n = int(ro.mask[0].sum())
    if expected is not None:
        assert ro.sampler_logp[0, :n] == pytest.approx([expected] * n, abs=1e-3)
    else:
        ours = _hf_logp(model, prompts[0], ro.completion_ids[0, :n].tolist(), 1.0)
        assert torch.allclose(ro.sampler_logp[0, :n], ours, atol=0.15)
    del sampler  # free the engine's GPU memory before the next parametrization starts its own
    gc.collect()
    torch.cuda.empty_cache()
