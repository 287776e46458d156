"""Qwen3.5's pieces in the fast sampler (rlvr.sampling.deltanet, rlvr.sampling.qwen3_5) against transformers' own
(modeling_qwen3_5): the delta rule's recurrent step and chunked prefill against its reference kernels
(torch_recurrent_gated_delta_rule, torch_chunk_gated_delta_rule), the short convolution and the gated RMSNorm against
its modules, a prompt's states handed to its rows, the refusals, and episodes without a prefix cache. The family's
forward, greedy decoding and log-probs: tests/test_sampling_families.py; training and resume: tests/test_dtype_tier.py;
the update's fast path: tests/test_fastpath.py."""

import warnings

import pytest
import torch
from transformers.models.qwen3_5 import modeling_qwen3_5 as hf

from conftest import make_tiny_model
from rlvr.sampling import deltanet, llama, make_sampler, qwen3_5
from rlvr.sampling.fast import HybridSampler
from test_sampler import STOP, VOCAB, CharTok

P, L, HK, HV, DK, DV = 3, 150, 2, 4, 16, 8  # two key heads serving four value heads; past two chunks of 64


def rule_inputs(seed: int = 0):
    """Random q, k (P, L, Hk, Dk), v (P, L, Hv, Dv), and g, beta (P, L, Hv) as the layer makes them: decays from a
    strong A (up to 16, transformers' init range), beta a sigmoid."""
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(P, L, HK, DK, generator=g), torch.randn(P, L, HK, DK, generator=g)
    v = torch.randn(P, L, HV, DV, generator=g)
    A = -torch.empty(HV).uniform_(0.01, 16, generator=g)
    decay, beta = deltanet.decay_and_beta(torch.randn(P, L, HV, generator=g), torch.randn(P, L, HV, generator=g), A, 1)
    return q, k, v, decay, beta


def reference(kernel, q, k, v, g, beta, state=None):
    return kernel(q, k, v, g=g, beta=beta, initial_state=state, output_final_state=True, use_qk_l2norm_in_kernel=True)


def test_the_chunked_prefill_is_transformers_chunked_kernel():
    """Three sequences of 150 tokens (three blocks of 64, the last partial): outputs and final states to float32
    rounding (measured 1e-8 and 3e-8; the chunked and the recurrent reference differ by 1e-6 between themselves)."""
    q, k, v, g, beta = rule_inputs()
    want, want_state = reference(hf.torch_chunk_gated_delta_rule, q, k, v, g, beta)
    got, state = deltanet.chunked(*deltanet.heads(q, k, HV), v, g, beta)
    assert (got - want).abs().max() < 1e-6 and (state - want_state).abs().max() < 1e-6


def test_a_shorter_prompt_ends_with_its_own_state():
    """Prompts of 150, 70 and 3 tokens in one batch, zeros after each end: each prompt's outputs and final state are
    those of the reference on that prompt alone."""
    q, k, v, g, beta = rule_inputs(1)
    lengths = [150, 70, 3]
    real = (torch.arange(L)[None, :] < torch.tensor(lengths)[:, None]).float()
    qh, kh = deltanet.heads(q, k, HV)
    keep = lambda x: x * real.view(P, L, *[1] * (x.dim() - 2))  # noqa: E731
    got, states = deltanet.chunked(keep(qh), keep(kh), keep(v), keep(g), keep(beta))
    for p, n in enumerate(lengths):
        one = (x[p : p + 1, :n] for x in (q, k, v, g, beta))
        want, want_state = reference(hf.torch_chunk_gated_delta_rule, *one)
        assert (got[p : p + 1, :n] - want).abs().max() < 1e-6 and (states[p] - want_state[0]).abs().max() < 1e-6


def native_step():
    from rlvr.sampling.native import deltanet_ops

    ops = deltanet_ops()
    return ops.recurrent_step if ops is not None else None


@pytest.mark.parametrize("kind", ["native", "torch"])
def test_the_decode_step_is_transformers_recurrent_kernel(kind):
    """From a random state: one step's output and state as the recurrent reference's; 150 steps from zero, each its
    output, and the final state (measured 6e-8 and 0); the native kernel (rlvr.sampling.native's deltanet.cpp, what
    the sampler runs where it builds) and the torch ops alike."""
    step = native_step() if kind == "native" else deltanet.recurrent_step
    if step is None:
        pytest.skip("the native kernel does not build here")
    q, k, v, g, beta = rule_inputs(2)
    start = torch.randn(P, HV, DK, DV, generator=torch.Generator().manual_seed(3))
    want, want_state = reference(hf.torch_recurrent_gated_delta_rule, *(x[:, :1] for x in (q, k, v, g, beta)), start)
    qh, kh = deltanet.heads(q, k, HV)
    S = start.clone()
    got = step(S, qh[:, 0], kh[:, 0], v[:, 0], g[:, 0], beta[:, 0])
    assert (got - want[:, 0]).abs().max() < 1e-6 and (S - want_state).abs().max() < 1e-6
    want, want_state = reference(hf.torch_recurrent_gated_delta_rule, q, k, v, g, beta)
    S = torch.zeros(P, HV, DK, DV)
    steps = torch.stack(
        [deltanet.recurrent_step(S, qh[:, t], kh[:, t], v[:, t], g[:, t], beta[:, t]) for t in range(L)]
    )
    assert (steps.transpose(0, 1) - want).abs().max() < 1e-6 and (S - want_state).abs().max() < 1e-6


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_convolution_prefilled_then_stepped_is_transformers(dtype):
    """transformers' causal_conv1d_fn (with silu) over 12 tokens, in a model of the dtype: the first 9 by conv_prefill,
    its last K - 1 inputs the state, the other 3 by conv_step: float32 to rounding, bf16 within one rounding."""
    C, K, n = 24, 4, 12
    gen = torch.Generator().manual_seed(4)
    x, weight = torch.randn(2, n, C, generator=gen).to(dtype), torch.randn(C, K, generator=gen).to(dtype)
    want = hf.causal_conv1d_fn(x.transpose(1, 2), weight, activation="silu").transpose(1, 2).float()
    w = weight.float().t().contiguous()
    got = [deltanet.conv_prefill(x[:, :9], w)]
    state = x[:, 9 - (K - 1) : 9].clone()
    got += [deltanet.conv_step(state, x[:, t], w)[:, None] for t in range(9, n)]
    tol = 1e-6 if dtype == torch.float32 else 2**-7 * want.abs().max()
    assert (torch.cat(got, 1).float() - want).abs().max() <= tol
    assert torch.equal(state, x[:, n - (K - 1) :])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_gated_norm_is_transformers(dtype):
    """Qwen3_5RMSNormGated on the rule's output handed over in the dtype, gated by z: equal (bf16: bit for bit)."""
    gen = torch.Generator().manual_seed(5)
    o, z = torch.randn(6, DV, generator=gen), torch.randn(6, DV, generator=gen).to(dtype)
    norm = hf.Qwen3_5RMSNormGated(DV, eps=1e-6)
    with torch.no_grad():
        norm.weight.copy_(1 + 0.3 * torch.randn(DV, generator=gen))
        want = norm(o.to(dtype), z)
    got = deltanet.gated_norm(o, z, norm.weight.detach(), 1e-6, dtype)
    assert got.dtype == dtype and (got.float() - want.float()).abs().max() <= (0 if dtype == torch.bfloat16 else 1e-6)


def native_ops():
    from rlvr.sampling.native import deltanet_ops

    return deltanet_ops()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_native_layer_step_is_the_torch_one(dtype):
    """A decode step's token mixer in one native call (what the sampler runs where it builds) against the torch ops it
    replaces (each tested against transformers' above), three steps from a random state, with rows of random inputs:
    the outputs, the convolution's state (exactly) and the rule's state. float32 to rounding; bf16 outputs within one
    bf16 rounding of the largest (a float32 difference can round the other way), states to float32 rounding."""
    ops = native_ops()
    if ops is None:
        pytest.skip("the native kernel does not build here")
    model = make_tiny_model("qwen3_5_text", VOCAB, seed=2).eval()
    w = qwen3_5.load_weights(model, dtype)
    assert w.fused is ops and qwen3_5.load_weights(model, dtype, native=False).fused is None
    L = w.stack[0]
    gen = torch.Generator().manual_seed(6)
    fused, plain = (qwen3_5.HybridCache(w, 5, 1, [1] * 5) for _ in range(2))
    plain.fused = None
    start_conv = torch.randn(fused.conv_state.shape, generator=gen).to(dtype)
    start = torch.randn(fused.state.shape, generator=gen)
    for cache in (fused, plain):
        cache.conv_state, cache.state = start_conv.clone(), start.clone()
    width = 2 * w.n_k * w.dk + 2 * w.n_v * w.dv + 2 * w.n_v  # q | k | v, z, b, a
    for _ in range(3):
        proj = (torch.randn(5, width, generator=gen) * 2).to(dtype)
        got, want = fused.mix(0, w, L, proj), plain.mix(0, w, L, proj)
        tol = 1e-5 if dtype == torch.float32 else 2**-7 * float(want.abs().max())
        assert got.dtype == dtype and (got.float() - want.float()).abs().max() <= tol
    assert torch.equal(fused.conv_state, plain.conv_state)
    assert (fused.state - plain.state).abs().max() < 1e-5


def test_a_decay_below_e_to_the_minus_60_is_zero():
    """Strong decays leave no denormal floats in the state (they ran several times slower): exp(g) is 0 below
    e^-60, in both steps; the state then holds only this token's write."""
    S = torch.full((1, 1, 4, 4), 1e-3)
    k = torch.nn.functional.normalize(torch.ones(1, 1, 4), dim=-1)
    v, g, beta = torch.ones(1, 1, 4), torch.tensor([[-61.0]]), torch.ones(1, 1)
    assert deltanet.decay_exp(torch.tensor([-59.0, -61.0])).tolist() == [pytest.approx(2.06e-26, rel=1e-2), 0.0]
    for step in filter(None, (deltanet.recurrent_step, native_step())):
        state = S.clone()
        step(state, k, k, v, g, beta)
        assert torch.equal(state, k[..., :, None] * v[..., None, :])


def test_a_prompts_states_carry_into_its_rows():
    """A prompt prefilled (prompts of 1, 2 and 7 tokens: shorter and longer than the convolution's K - 1 = 3) then
    decoded token by token through its rows' states: each position's logits are transformers' forward of the whole
    sequence (float32, 1e-5), with rows leaving the batch on the way."""
    model = make_tiny_model("qwen3_5_text", VOCAB, seed=3, layers=4).eval()
    w = qwen3_5.load_weights(model, torch.float32)
    prompts = [[5], [6, 7], [8, 9, 10, 11, 12, 13, 14]]
    more = [[20, 21, 22, 23], [24, 25, 26, 27], [28, 29, 30, 31]]
    lengths = [len(p) for p in prompts]
    cache = qwen3_5.HybridCache(w, 3, 1, lengths)
    attend = llama.prefill_attend_into(cache.pk, cache.pv, lengths)
    pos = torch.cat([torch.arange(n) for n in lengths])
    qwen3_5.forward(w, torch.tensor(sum(prompts, [])), pos, attend, qwen3_5.Prefill(cache, lengths))
    cache.share()
    for t in range(4):
        if t == 2:
            cache.keep(torch.tensor([True, False, True]))  # the second row finishes
        cache.begin_step(t)
        rows = cache.rows.tolist()
        tok = torch.tensor([more[r][t] for r in rows])
        got = llama.logits(w.base, qwen3_5.forward(w, tok, torch.tensor(lengths)[rows] + t, cache.attend, cache))
        for i, r in enumerate(rows):
            with torch.no_grad():
                want = model(torch.tensor([prompts[r] + more[r][: t + 1]])).logits[0, -1]
            assert (got[i] - want).abs().max() < 1e-5, (t, r)


@pytest.mark.parametrize(
    "over,why",
    [
        (dict(attention_bias=True), "attention_bias (Qwen3.5's attention projections without biases only)"),
        (dict(hidden_act="gelu"), "hidden_act 'gelu' (supported: silu, gelu_pytorch_tanh)"),
    ],
)
def test_settings_it_does_not_run_fall_back_to_hf(over, why):
    from transformers import AutoModelForCausalLM, Qwen3_5TextConfig

    from rlvr.sampling.hf import HFSampler

    config = make_tiny_model("qwen3_5_text", VOCAB).config.to_dict()
    model = AutoModelForCausalLM.from_config(Qwen3_5TextConfig(**{**config, **over})).eval()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        s = make_sampler("fast", model, CharTok(), stop_ids=[STOP], dtype="float32")
    assert [str(x.message) for x in caught] == [
        f"rollout.backend=fast does not run this model: {why}; sampling with hf"
    ]
    assert isinstance(s, HFSampler)


def test_episodes_prefill_each_turn_whole():
    """No prefix cache: `continuing` (an episode's turns) leaves the sampler alone, and a next turn that continues a
    row samples what a fresh sampler samples for it."""
    from rlvr.environments.episode import continuing

    model = make_tiny_model("qwen3_5_text", VOCAB, seed=1, layers=4).eval()
    sampler = make_sampler("fast", model, CharTok(), stop_ids=[STOP], dtype="float32")
    assert isinstance(sampler, HybridSampler) and sampler.prefix is None
    kw = dict(max_new_tokens=6, temperature=1.0)
    with continuing(sampler):
        first = sampler.generate([[5, 6, 7]], 2, generator=torch.Generator().manual_seed(0), **kw)
        turn = [[5, 6, 7] + first.completion_ids[0].tolist() + [40, 41]]
        second = sampler.generate(turn, 1, generator=torch.Generator().manual_seed(1), **kw)
    fresh = make_sampler("fast", model, CharTok(), stop_ids=[STOP], dtype="float32")
    again = fresh.generate(turn, 1, generator=torch.Generator().manual_seed(1), **kw)
    assert second.completion_ids.tolist() == again.completion_ids.tolist()
    assert torch.equal(second.sampler_logp, again.sampler_logp)
