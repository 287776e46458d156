"""The packed, left-padded forward gives each row exactly the log-probs of an unpadded forward of that row."""

import torch

from conftest import make_tiny_llama
from rlvr.policy.logprobs import PromptPass, completion_logprobs, pack_rows, real_tokens

PAD = 0


def reference_logprobs(model, prompt, completion):
    ids = torch.tensor([prompt + completion])
    logits = model(input_ids=ids).logits[0, len(prompt) - 1 : -1].float()
    return torch.log_softmax(logits, -1).gather(-1, torch.tensor(completion)[:, None])[:, 0]


def test_pack_rows_layout():
    ids, att, pos = pack_rows(
        [[5, 6, 7], [8]], torch.tensor([[1, 2], [3, 0]]), torch.tensor([[1.0, 1.0], [1.0, 0.0]]), PAD
    )
    assert ids.tolist() == [[5, 6, 7, 1, 2], [0, 0, 8, 3, 0]]
    assert att.tolist() == [[1, 1, 1, 1, 1], [0, 0, 1, 1, 0]]
    assert pos.tolist() == [[0, 1, 2, 3, 4], [0, 0, 0, 1, 1]]


def test_left_padded_batch_matches_unpadded_rows():
    model = make_tiny_llama(64, seed=1).eval()
    prompts = [[5, 6, 7, 8, 9], [10, 11], [12, 13, 14]]
    completions = [[20, 21, 22], [23], [24, 25]]
    t = 3
    ids = torch.zeros(3, t, dtype=torch.long)
    mask = torch.zeros(3, t)
    for i, c in enumerate(completions):
        ids[i, : len(c)] = torch.tensor(c)
        mask[i, : len(c)] = 1
    with torch.no_grad():
        logp, _ = completion_logprobs(model, prompts, ids, mask, pad_id=PAD)
        for i, (p, c) in enumerate(zip(prompts, completions)):
            torch.testing.assert_close(logp[i, : len(c)], reference_logprobs(model, p, c), atol=1e-5, rtol=1e-5)


def test_temperature_divides_logits():
    model = make_tiny_llama(64, seed=2).eval()
    ids, mask = torch.tensor([[20, 21]]), torch.ones(1, 2)
    with torch.no_grad():
        out = model(input_ids=torch.tensor([[5, 6, 20, 21]])).logits[0, 1:3].float()
        expected = torch.log_softmax(out / 0.5, -1).gather(-1, ids[0][:, None])[:, 0]
        logp, ent = completion_logprobs(model, [[5, 6]], ids, mask, pad_id=PAD, temperature=0.5, with_entropy=True)
    torch.testing.assert_close(logp[0], expected, atol=1e-5, rtol=1e-5)
    p = torch.softmax(out / 0.5, -1)
    torch.testing.assert_close(ent[0], -(p * p.log()).sum(-1), atol=1e-4, rtol=1e-4)


def test_shared_prompt_forward_matches_rows_and_their_gradients():
    from rlvr.policy.logprobs import PromptPass

    def shared_prompt_logprobs(model, prompts, ids, mask, *, pad_id, temperature):  # one pass, one graph
        return PromptPass(model, prompts, pad_id=pad_id).logprobs(model, prompts, ids, mask, temperature=temperature)

    prompts = [[5, 6, 7, 8, 9]] * 3 + [[10, 11]] * 2  # two groups, prompts of different lengths
    completions = [[20, 21, 22], [23], [24, 25], [26, 27, 28], [29]]
    ids = torch.zeros(5, 3, dtype=torch.long)
    mask = torch.zeros(5, 3)
    for i, c in enumerate(completions):
        ids[i, : len(c)] = torch.tensor(c)
        mask[i, : len(c)] = 1
    grads = []
    for fn in (completion_logprobs, shared_prompt_logprobs):
        model = make_tiny_llama(64, seed=4)
        out = fn(model, prompts, ids, mask, pad_id=PAD, temperature=0.7)
        logp = out[0] if isinstance(out, tuple) else out
        (logp * mask).sum().backward()
        grads.append((logp.detach(), [p.grad.clone() for p in model.parameters()]))
    (a, ga), (b, gb) = grads
    torch.testing.assert_close(a * mask, b * mask, atol=1e-5, rtol=1e-5)
    for x, y in zip(ga, gb):
        torch.testing.assert_close(x, y, atol=1e-5, rtol=1e-4)


def test_prompt_pass_split_graph_gives_the_one_backward_gradient():
    """Micro-batches mixing prompts, each backward stopping at the prompt pass, then its own backward once:
    the same gradient as one backward through completion_logprobs of every row."""
    from rlvr.policy.logprobs import PromptPass

    prompts = [[5, 6, 7, 8, 9], [10, 11], [5, 6, 7, 8, 9], [12, 13, 14], [10, 11]]
    ids = torch.tensor([[20, 21, 22], [23, 0, 0], [24, 25, 0], [26, 27, 28], [29, 30, 0]])
    mask = (ids > 0).float()
    whole = make_tiny_llama(64, seed=4)
    logp, _ = completion_logprobs(whole, prompts, ids, mask, pad_id=PAD, temperature=0.7)
    (logp * mask * torch.arange(1.0, 6.0)[:, None]).sum().backward()
    split = make_tiny_llama(64, seed=4)
    pass1 = PromptPass(split, prompts, pad_id=PAD, split_graph=True)
    for rows in ([0, 3], [1], [4, 2]):  # rows of different prompts together, and one prompt over two chunks
        part = pass1.logprobs(split, [prompts[r] for r in rows], ids[rows], mask[rows], temperature=0.7)
        torch.testing.assert_close(part, logp[rows].detach() * mask[rows], atol=1e-5, rtol=1e-5)
        (part * mask[rows] * (torch.tensor(rows, dtype=torch.float32) + 1)[:, None]).sum().backward()
    k_proj = lambda m: m.model.layers[0].self_attn.k_proj.weight.grad  # noqa: E731
    assert not torch.allclose(k_proj(split), k_proj(whole), atol=1e-3)  # the prompts' keys have not backward yet
    pass1.backward()
    for a, b in zip(whole.parameters(), split.parameters()):
        torch.testing.assert_close(a.grad, b.grad, atol=1e-5, rtol=1e-4)


def test_the_lm_head_runs_as_one_matmul_on_the_kept_positions():
    """logits_to_keep as an int makes HF slice a strided view, and matmul then copies the lm_head weight once
    per row (an expand + bmm over (b, H, V)); the index tensor rlvr passes keeps it one matmul."""
    from torch.profiler import profile

    from rlvr.policy.logprobs import PromptPass, last_positions

    model = make_tiny_llama(64, seed=4).requires_grad_(False)  # a frozen head, as under LoRA (a trainable one folds)
    prompts = [[5, 6, 7, 8, 9], [10, 11], [12, 13, 14]]
    ids, mask = torch.tensor([[20, 21], [22, 0], [23, 24]]), torch.tensor([[1.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
    with profile(record_shapes=True) as prof:
        completion_logprobs(model, prompts, ids, mask, pad_id=PAD)
        PromptPass(model, prompts, pad_id=PAD)
    expanded = [
        e.input_shapes
        for e in prof.events()
        if e.name == "aten::bmm"
        and e.input_shapes
        and len(e.input_shapes[1]) == 3
        and e.input_shapes[1][1:] == [32, 64]
    ]
    assert expanded == []
    assert last_positions(2, 5).tolist() == [3, 4]
    # the kept positions' logits are those of the full forward
    full = model(input_ids=torch.tensor([[5, 6, 7, 8, 9]])).logits
    kept = model(input_ids=torch.tensor([[5, 6, 7, 8, 9]]), logits_to_keep=last_positions(2, 5)).logits
    torch.testing.assert_close(kept, full[:, -2:])


def test_an_episodes_environment_ids_are_seen_though_not_scored():
    # Two episode rows: policy ids, a tool's ids (mask 0), policy ids; the second row is shorter (padding after it).
    # The scored log-probs are those of one plain forward of the whole sequence, the tool's ids in the context of the
    # turn after them, by both forwards the trainer uses; attending only where the loss is hides the tool's answer.
    model = make_tiny_llama(64, seed=1).eval()
    prompts = [[5, 6, 7, 8, 9], [10, 11]]
    rows = [[20, 21, 22, 40, 41, 42, 23, 24, 25], [26, 27, 43, 44, 28, 29]]
    masks = [[1, 1, 1, 0, 0, 0, 1, 1, 1], [1, 1, 0, 0, 1, 1]]
    t = 9
    ids, mask = torch.zeros(2, t, dtype=torch.long), torch.zeros(2, t)
    for i, (r, m) in enumerate(zip(rows, masks)):
        ids[i, : len(r)], mask[i, : len(m)] = torch.tensor(r), torch.tensor(m, dtype=torch.float)
    attend = real_tokens(torch.tensor([len(r) for r in rows]), t)
    assert attend.tolist()[1] == [1.0] * 6 + [0.0] * 3
    with torch.no_grad():
        packed, _ = completion_logprobs(model, prompts, ids, mask, pad_id=PAD, attend=attend)
        shared = PromptPass(model, prompts, pad_id=PAD).logprobs(model, prompts, ids, mask, attend=attend)
        hidden, _ = completion_logprobs(model, prompts, ids, mask, pad_id=PAD)  # the environment's ids unseen
        for i, (p, r, m) in enumerate(zip(prompts, rows, masks)):
            want = reference_logprobs(model, p, r) * torch.tensor(m, dtype=torch.float)
            torch.testing.assert_close(packed[i, : len(r)], want, atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(shared[i, : len(r)], want, atol=1e-5, rtol=1e-5)
            after = len(r) - 2  # a policy token after the tool's ids
            assert abs(float(hidden[i, after] - want[after])) > 1e-4


def test_a_model_with_recurrent_layers_runs_each_row_whole():
    """Qwen3.5's delta-net layers keep a convolution and a recurrent state per row, not keys and values: PromptPass
    shares no prompt state for it (shares_prompts) and runs each row whole. Its rows' log-probs (left-padded prompts
    of three lengths, a shorter completion padded after it) are each row's own unpadded forward's, and split_graph's
    micro-batches give one backward's gradient."""
    from conftest import make_tiny_model
    from rlvr.policy.logprobs import shares_prompts

    assert shares_prompts(make_tiny_llama(64)) and not shares_prompts(make_tiny_model("qwen3_5_text", 64))
    prompts = [[5, 6, 7, 8, 9], [10, 11], [5, 6, 7, 8, 9], [12, 13, 14]]
    ids = torch.tensor([[20, 21, 22], [23, 0, 0], [24, 25, 0], [26, 27, 28]])
    mask = (ids > 0).float()
    whole = make_tiny_model("qwen3_5_text", 64, seed=4)
    logp, _ = completion_logprobs(whole, prompts, ids, mask, pad_id=PAD, temperature=0.7)
    (logp * mask).sum().backward()
    with torch.no_grad():
        for i, p in enumerate(prompts):
            n = int(mask[i].sum())
            logits = whole(input_ids=torch.tensor([p + ids[i, :n].tolist()])).logits[0, len(p) - 1 : -1] / 0.7
            want = logits.log_softmax(-1).gather(-1, ids[i, :n, None])[:, 0]
            torch.testing.assert_close(logp[i, :n].detach(), want, atol=1e-5, rtol=1e-5)
    split = make_tiny_model("qwen3_5_text", 64, seed=4)
    pass1 = PromptPass(split, prompts, pad_id=PAD, split_graph=True)
    for rows in ([0, 3], [1, 2]):
        part = pass1.logprobs(split, [prompts[r] for r in rows], ids[rows], mask[rows], temperature=0.7)
        torch.testing.assert_close(part, logp[rows].detach() * mask[rows], atol=1e-5, rtol=1e-5)
        (part * mask[rows]).sum().backward()
    pass1.backward()
    for a, b in zip(whole.parameters(), split.parameters()):
        torch.testing.assert_close(a.grad, b.grad, atol=1e-5, rtol=1e-4)
