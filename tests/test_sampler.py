"""Sampler backends on a tiny random Llama: contract shapes, stop/padding/mask, determinism, weight sync
(plain and LoRA), and the fast backend against HF's forward, greedy decode and sampling distribution."""
import math

import pytest
import torch

from rlvr.sampler import make_sampler
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

    cfg = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
               num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
               tie_word_embeddings=True, rope_theta=10000.0)
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


@pytest.mark.parametrize("backend", ["hf"])
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
