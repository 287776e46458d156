"""The fast sampler on the families it runs beyond Llama's (tests/test_sampler.py holds Llama's, Mistral's and Qwen2's):
Qwen3 (a per-head RMSNorm of q and k before RoPE), SmolLM3 (layers without RoPE), Gemma 3 (conftest.make_tiny_model:
its norms, GELU-tanh, sliding windows that prompts and completions outgrow, two RoPE tables) and Qwen3.5 (gated
delta-net layers and gated full attention: rlvr.sampling.qwen3_5; its own pieces in tests/test_sampling_qwen3_5.py),
each a tiny random model from transformers' config class, in float32 and bf16. The forward is transformers' (logits),
greedy decoding is
transformers' `generate`, the sampled tokens' log-probs are the trainer's (rlvr.policy.logprobs), and `fast` runs
them itself rather than falling back to `hf`. Training and an exact resume on them, in both dtypes:
tests/test_dtype_tier.py; the update's fast path on them: tests/test_fastpath.py."""

import warnings

import pytest
import torch

from conftest import make_tiny_model
from rlvr.policy.logprobs import completion_logprobs
from rlvr.sampling import llama, make_sampler, qwen3_5
from rlvr.sampling.families import FAMILIES as FAMILY_ENTRIES
from rlvr.sampling.fast import FastSampler
from test_sampler import STOP, VOCAB, CharTok, hf_logits

FAMILIES = ("qwen3", "smollm3", "gemma3_text", "qwen3_5_text")
FALLBACK = "rollout.backend=fast does not run this model"


def sharp_model(family: str, seed: int = 0):
    """The family's tiny model, 4 layers (SmolLM3: two without RoPE; Qwen3.5: two delta-net, two attention), its
    matrices scaled up as tests/test_sampler.py's
    tiny Llama: sharper logits, so greedy paths and stops are not ties."""
    model = make_tiny_model(family, VOCAB, seed, layers=4)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.mul_(4.0)
    return model.eval()


@pytest.fixture(scope="module", params=FAMILIES)
def model(request):
    return sharp_model(request.param)


def fast(model, dtype: str, stops=(STOP,)) -> FastSampler:
    """The fast sampler on `model`, which must not have fallen back to hf (no warning saying so)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sampler = make_sampler("fast", model, CharTok(), stop_ids=list(stops), dtype=dtype)
    assert [str(w.message) for w in caught if FALLBACK in str(w.message)] == []
    assert isinstance(sampler, FastSampler)
    return sampler


def test_each_family_reads_its_own_pieces(model):
    """Qwen3's layers carry their q/k norm weights, SmolLM3's the layers it rotates (transformers' no_rope_layers),
    Gemma 3's the rest of its pieces (gemma_pieces), Qwen3.5's its two kinds of layer in transformers' layer_types order,
    RoPE on 4 of each head's 16 dims."""
    if model.config.model_type == "qwen3_5_text":
        h = qwen3_5.load_weights(model, torch.float32)
        kinds = ["full_attention" if isinstance(L, llama.Layer) else "linear_attention" for L in h.stack]
        assert kinds == model.config.layer_types == ["linear_attention", "full_attention"] * 2
        assert [L.qk_norm.shape for L in h.base.layers] == [(4 + 2, 16)] * 2 and h.base.head_dim == 16
        assert h.base.inv_freq[:2].gt(0).all() and h.base.inv_freq[2:].eq(0).all()  # 2 of 8 pairs turn
        return
    w = llama.load_weights(model, torch.float32)
    if model.config.model_type == "qwen3":
        assert all(L.qk_norm is not None and L.qk_norm.shape == (4 + 2, 16) and L.rope for L in w.layers)
        assert w.head_dim == 16  # the config's head_dim, not hidden / heads = 8
    elif model.config.model_type == "gemma3_text":
        gemma_pieces(model, w)
    else:
        assert (
            [L.rope for L in w.layers] == [True, False, True, False] == [bool(x) for x in model.config.no_rope_layers]
        )
        assert all(L.qk_norm is None for L in w.layers)


def gemma_pieces(model, w: llama.LlamaWeights) -> None:
    """Every norm weight w read as the 1 + w it scales by, the attention's and the MLP's output norms in their own
    fields (transformers' post_attention_layernorm is Gemma's output norm, its pre-MLP norm pre_feedforward_layernorm),
    the embedding rows times sqrt(32), GELU-tanh, q scaled by query_pre_attn_scalar**-0.5 = 1/8 (not 1/sqrt(16)), the
    sliding layers' window and their own RoPE table (base 10,000; the global layers 1,000,000 with linear scaling)."""
    p, rotary = model.model, model.model.rotary_emb
    layers = p.layers
    assert [L.window for L in w.layers] == [8, None, 8, None] and [L.local for L in w.layers] == [1, 0, 1, 0]
    for L, hf in zip(w.layers, layers):
        for mine, theirs in [
            (L.ln1, hf.input_layernorm),
            (L.ln2, hf.pre_feedforward_layernorm),
            (L.post_attn, hf.post_attention_layernorm),
            (L.post_mlp, hf.post_feedforward_layernorm),
        ]:
            assert torch.equal(mine, 1 + theirs.weight)
        assert torch.equal(L.qk_norm[0], llama._interleave(1 + hf.self_attn.q_norm.weight, 16))
    assert torch.equal(w.norm, 1 + p.norm.weight)
    assert torch.equal(w.embed, p.embed_tokens.weight) and w.embed.dtype == torch.float32  # random float32 rows
    assert w.embed_scale.dtype == torch.float32 and w.embed_scale.item() == torch.tensor(32**0.5).item()
    assert w.act == "gelu_pytorch_tanh" and w.qk_round_last
    assert w.head_gain.flatten().tolist() == [0.125] * 4 + [1.0] * 2
    assert torch.equal(w.inv_freq, rotary.full_attention_inv_freq) and w.inv_freq[0] == 1 / 8  # linear, factor 8
    assert torch.equal(w.local_rope[0], rotary.sliding_attention_inv_freq) and w.local_rope[0][1] == 10_000 ** -(2 / 16)


@pytest.mark.parametrize("native", [True, False], ids=["native", "torch"])
def test_forward_matches_transformers(model, native):
    """Two prompts packed in one prefill, each seeing only itself: logits within the Llama tests' bounds of
    transformers' float32 forward (float32 1e-4; bf16 0.15 of the largest logit, 0.1 in log-prob), on the native ops
    and on torch's."""
    ids = [5, 17, 33, 2, 90, 41, 7, 64, 12] + list(range(20, 50))  # 39 positions: RoPE turns well past its start
    ref = hf_logits(model, ids)
    for dtype, tol, lp_tol in [(torch.float32, 1e-4, 1e-4), (torch.bfloat16, 0.15, 0.1)]:
        got = packed_logits(model, dtype, native, [[7, 7, 1, 60], ids])[4:]
        err = (got - ref).abs().max().item()
        assert err < tol * max(1.0, ref.abs().max().item()), (dtype, err)
        lp_err = (got.log_softmax(-1) - ref.log_softmax(-1)).abs().max().item()
        assert lp_err < lp_tol, (dtype, lp_err)


def packed_logits(model, dtype: torch.dtype, native: bool, prompts: list[list[int]]) -> torch.Tensor:
    """The fast forward's float32 logits of prompts packed in one prefill (each seeing only itself), concatenated."""
    lengths = [len(p) for p in prompts]
    pos = torch.cat([torch.arange(n) for n in lengths])
    tokens = torch.tensor([t for p in prompts for t in p])
    if model.config.model_type == "qwen3_5_text":
        h = qwen3_5.load_weights(model, dtype, native=native)
        assert (h.base.fused is not None) == native
        cache = qwen3_5.HybridCache(h, len(prompts), 1, lengths)
        attend = llama.prefill_attend_into(cache.pk, cache.pv, lengths)
        return llama.logits(h.base, qwen3_5.forward(h, tokens, pos, attend, qwen3_5.Prefill(cache, lengths)))
    w = llama.load_weights(model, dtype, native=native)
    assert (w.fused is not None) == native
    pk = torch.zeros(len(w.layers), len(prompts), w.n_kv, max(lengths), w.head_dim, dtype=dtype)
    windows = [L.window for L in w.layers]  # Gemma 3's sliding layers: 8 keys of the 39
    attend = llama.prefill_attend_into(pk, torch.zeros_like(pk), lengths, windows=windows)
    return llama.logits(w, llama.forward(w, tokens, pos, attend))


def test_greedy_equals_transformers_generate(model):
    """float32: greedy decoding through the cascade cache (prompts of several lengths, rows stopping at different
    steps, past a cache block) gives transformers' generate's tokens, with its log-probs to 1e-4. bf16: the first four
    tokens of every row (rounding may flip a near-tie later, as tests/test_sampler.py allows for Llama)."""
    prompts = [[5, 6, 7, 8, 9], [20], [30, 31, 32], [44, 45]]
    kw = dict(max_new_tokens=70, temperature=0.0)  # past one block (64) of the generated cache
    free = make_sampler("hf", model, CharTok(), stop_ids=[STOP], dtype="float32").generate(prompts, 1, **kw)
    seen = [set(r[2:]) for r in free.completion_ids.tolist()]
    stop2 = next(t for t in free.completion_ids[0, 2:].tolist() if any(t not in s for s in seen[1:]))
    hf = make_sampler("hf", model, CharTok(), stop_ids=[STOP, stop2], dtype="float32").generate(prompts, 2, **kw)
    got = fast(model, "float32", (STOP, stop2)).generate(prompts, 2, **kw)
    assert got.completion_ids.tolist() == hf.completion_ids.tolist()
    assert got.finish == hf.finish and "stop" in got.finish and "length" in got.finish
    assert (got.sampler_logp - hf.sampler_logp).abs().max().item() < 1e-4
    bf16 = fast(model, "bfloat16").generate(prompts, 1, max_new_tokens=16, temperature=0.0)
    assert bf16.completion_ids[:, :4].tolist() == free.completion_ids[:, :4].tolist()


# The sampler's log-probs of its own samples against the trainer's forward on them (completion_logprobs; bf16: under
# bf16 autocast, as the update runs): float32 to rounding (measured 2e-7 mean, 1e-6 largest); bf16 inside the band
# docs/scaling.md gives a bf16 sampler (mean |log ratio| about 0.03), here 2-3e-3 mean and 0.01-0.02 the largest.
LOGP_BOUNDS = {"float32": (1e-5, 1e-4), "bfloat16": (0.02, 0.2)}  # (mean, max) |sampler - trainer| per token


@pytest.mark.parametrize("dtype", list(LOGP_BOUNDS))
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_sampler_logprobs_are_the_trainers(model, dtype, temperature):
    prompts = [[5, 6, 7, 8, 9], [20, 21], [30, 31, 32]]
    g = torch.Generator().manual_seed(1)
    r = fast(model, dtype).generate(prompts, 4, max_new_tokens=24, temperature=temperature, generator=g)
    rows = [prompts[i] for i in r.group_ids.tolist()]
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == "bfloat16"):
        trainer, _ = completion_logprobs(model, rows, r.completion_ids, r.mask, pad_id=0, temperature=temperature)
    gap = (r.sampler_logp - trainer).abs()[r.mask > 0]
    mean_bound, max_bound = LOGP_BOUNDS[dtype]
    assert gap.numel() > 100 and gap.mean().item() < mean_bound and gap.max().item() < max_bound, (
        gap.mean().item(),
        gap.max().item(),
    )


@pytest.mark.parametrize("family", [f for f in FAMILIES if not FAMILY_ENTRIES[f].recurrent])  # Qwen3.5: its own
def test_an_embedding_of_bf16_values_is_kept_in_bf16(family):
    """A bf16 checkpoint's embedding (in the float32 trainer, frozen) holds bf16 values only: the sampler keeps it in
    bf16, half the memory (at Gemma 3 270M's 262,144 x 640: 335 MB less), and its forward is the float32 table's bit for
    bit (Gemma 3's sqrt(H) applied to the gathered rows). A table with one entry off bf16 stays float32."""
    model = sharp_model(family)
    with torch.no_grad():
        model.get_input_embeddings().weight.copy_(model.get_input_embeddings().weight.bfloat16().float())
    w = llama.load_weights(model, torch.float32)
    assert w.embed.dtype == torch.bfloat16 and torch.equal(w.embed.float(), model.get_input_embeddings().weight)
    tokens, positions = torch.tensor([5, 17, 33, 2, 90]), torch.arange(5)
    attend = lambda w: llama.prefill_attend_into(*caches(w, 5), [5], windows=[L.window for L in w.layers])  # noqa: E731
    got = llama.forward(w, tokens, positions, attend(w))
    w.embed = w.embed.float()
    assert torch.equal(got, llama.forward(w, tokens, positions, attend(w)))
    with torch.no_grad():
        model.get_input_embeddings().weight[3, 7] += 2**-20
    assert llama.load_weights(model, torch.float32).embed.dtype == torch.float32


def caches(w: llama.LlamaWeights, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    pk = torch.zeros(len(w.layers), 1, w.n_kv, n, w.head_dim, dtype=w.dtype)
    return pk, torch.zeros_like(pk)


@pytest.mark.parametrize("dtype, tol", [("float32", 1e-4), ("bfloat16", 0.15)])
def test_gemma_continues_its_rows_from_their_cache(dtype, tol):
    """An episode's next turn on Gemma 3 (tests/test_sampler.py checks Llama's): prefilling only the new tokens after a
    cached row, its sliding layers' windows reaching back into the cached keys (turns of 20-odd tokens, a window of 8),
    gives the greedy tokens and log-probs of prefilling the whole turn again."""
    from rlvr.environments.episode import continuing

    model, prompts, kw = sharp_model("gemma3_text"), [[5, 6, 7, 8, 9], [20], [30, 31, 32]], dict(temperature=0.0)
    cached, fresh = fast(model, dtype), fast(model, dtype)
    with continuing(cached):
        first = cached.generate(prompts, 1, max_new_tokens=16, **kw)
        rows = [first.completion_ids[b, : int(first.mask[b].sum())].tolist() for b in range(3)]
        turn2 = [p + r + [40 + b, 41] for b, (p, r) in enumerate(zip(prompts, rows))]
        again = cached.generate(turn2, 1, max_new_tokens=12, **kw)
        assert cached.prefix.reused == sum(len(p) - 3 for p in turn2) and min(map(len, turn2)) > 8
    whole = fresh.generate(turn2, 1, max_new_tokens=12, **kw)
    assert again.completion_ids.tolist() == whole.completion_ids.tolist()
    assert (again.sampler_logp - whole.sampler_logp).abs().max().item() < tol


@pytest.mark.parametrize("native", [True, False], ids=["native", "torch"])
def test_a_llama_with_gelu_tanh_runs_it_too(native):
    """The activation is the forward's, not Gemma's: a Llama whose hidden_act is gelu_pytorch_tanh (refused before,
    like any but silu) samples on fast, its logits transformers' (float32 within 1e-4, as Llama's)."""
    from test_sampler import tiny_llama

    model = tiny_llama(hidden_act="gelu_pytorch_tanh")
    fast(model, "float32")
    w = llama.load_weights(model, torch.float32, native=native)
    assert w.act == "gelu_pytorch_tanh"
    ids = list(range(4, 30))
    got = llama.logits(
        w,
        llama.forward(
            w, torch.tensor(ids), torch.arange(len(ids)), llama.prefill_attend_into(*caches(w, len(ids)), [len(ids)])
        ),
    )
    ref = hf_logits(model, ids)
    assert (got - ref).abs().max().item() < 1e-4 * max(1.0, ref.abs().max().item())
