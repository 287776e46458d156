"""The policy forward: per-token log-probs (and entropy) of sampled completions given their prompts.

Rows are laid out as [left-padded prompt | completion], so every completion starts at the same column and
`logits_to_keep` asks the model for the completion positions only.

Two masks, never one for both: `completion_mask` says which tokens are scored (1 on the policy's own tokens), and
`attend` which tokens are there to be seen (every real token of the row). They differ in an episode, whose
environment ids (a tool's output) are in the context of the next turn but not in the loss: attending only where the
loss is would train the next turn as if the tool had never answered. Log-probs are taken in float32 a few
rows at a time (policy.softmax.selective_log_softmax), so the full-vocabulary float32 logits of a whole batch
never exist at once.

The device boundary is here: the step's records stay on the CPU, the rows go to the model's device (`model.device`:
a GPU) for the forward, and the log-probs come back to the device of the completions they score, so the losses and
figures downstream run where the batch is. The copy back is differentiable: the backward crosses it to the model.
"""

from __future__ import annotations

import contextlib
import functools
import inspect

import torch

from rlvr.policy.load import base_model, model_device
from rlvr.policy.softmax import head_chosen_logp, selective_log_softmax, tempers, token_entropy_from_logits


def autocast(model, kind: str) -> contextlib.AbstractContextManager:
    """bf16 autocast on the model's device type when `kind` (train.autocast, resolved) is "bfloat16", else none."""
    if kind == "bfloat16":
        return torch.autocast(model_device(model).type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def cache_kwarg(model) -> str:
    """The name the model's forward takes its key/value cache under: transformers 5.2x renamed `past_key_values` to
    `cache` (the old name warns at every first call, and goes in 5.40), older versions know only the old one."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model  # a PEFT wrapper takes **kwargs
    cls: type = type(base)
    return _cache_kwarg_of(cls)


@functools.cache
def _cache_kwarg_of(cls) -> str:
    # once per model class: the update asks at every forward, and reading a signature is not free
    return "cache" if "cache" in inspect.signature(cls.forward).parameters else "past_key_values"


# families whose causal-LM forward is exactly lm_head(backbone(...).last_hidden_state) when their config sets no soft-cap
PLAIN_HEADS = ("llama", "mistral", "qwen2", "qwen3", "smollm3", "gemma3_text", "qwen3_5_text")


def frozen_head(model) -> tuple[torch.nn.Module, torch.Tensor] | None:
    """(backbone, head weight (V, H)) where the model's logits are its backbone's last hidden states times a frozen,
    bias-free head and nothing more: then the log-probs of the sampled tokens need no (rows, vocabulary) logits
    (softmax.head_chosen_logp), whose float32 copy and gradient at 4,096 tokens of a 151,936-token vocabulary are 2.5 GB
    each. None where the head trains (a full fine-tune), is wrapped (LoRA on lm_head), the family's forward does more
    (a soft-cap) or the weights are FSDP's shards (the head's is whole only inside the model's own forward)."""
    base = base_model(model)
    head = base.get_output_embeddings()
    config = base.config
    if (
        config.model_type not in PLAIN_HEADS
        or getattr(config, "final_logit_softcapping", None) is not None
        or type(head) is not torch.nn.Linear
        or head.bias is not None
        or head.weight.requires_grad
    ):
        return None
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        from torch.distributed.tensor import DTensor

        if isinstance(head.weight, DTensor):
            return None
    return getattr(base, base.base_model_prefix), head.weight


def pack_rows(prompts: list[list[int]], completion_ids: torch.Tensor, attend: torch.Tensor, pad_id: int):
    """Build model inputs for b rows.

    prompts: b lists of token ids; completion_ids (b, T); attend (b, T): the completion's real tokens (scored or not).
    Returns input_ids (b, Lp+T), attention_mask (b, Lp+T), position_ids (b, Lp+T), where Lp = longest prompt.
    """
    b, t = completion_ids.shape
    lp = max(len(p) for p in prompts)
    input_ids = torch.full((b, lp + t), pad_id, dtype=torch.long)
    attention = torch.zeros((b, lp + t), dtype=torch.long)
    for i, p in enumerate(prompts):
        input_ids[i, lp - len(p) : lp] = torch.tensor(p, dtype=torch.long)
        attention[i, lp - len(p) : lp] = 1
    input_ids[:, lp:] = completion_ids
    attention[:, lp:] = (attend > 0).long()
    # Left padding shifts every real token right; positions must count real tokens only.
    position_ids = (attention.cumsum(-1) - 1).clamp(min=0)
    return input_ids, attention, position_ids


def real_tokens(lengths: torch.Tensor, t: int) -> torch.Tensor:
    """(b, t) float: 1 on each row's first `lengths` completion positions, its real tokens (the `attend` mask)."""
    return (torch.arange(t)[None, :] < lengths[:, None]).float()


def completion_logprobs(
    model,
    prompts,
    completion_ids,
    completion_mask,
    *,
    pad_id: int,
    temperature: float = 1.0,
    with_entropy: bool = False,
    attend: torch.Tensor | None = None,
):
    """Per-token log-probs of the completions under `model`, at the sampling temperature.

    prompts: b lists of ids; completion_ids, completion_mask (the scored tokens), attend (the real tokens; None: the
    scored ones, as in a single-turn completion): (b, T).
    Returns (logp (b, T) float32, entropy (b, T) float32 or None). Unscored positions hold 0 (logp) or garbage.
    """
    attend = completion_mask if attend is None else attend
    home, device = completion_ids.device, model_device(model)
    input_ids, attention, position_ids = (x.to(device) for x in pack_rows(prompts, completion_ids, attend, pad_id))
    completion_ids, completion_mask = completion_ids.to(device), completion_mask.to(device)
    t = completion_ids.shape[1]
    head = None if with_entropy else frozen_head(model)
    if head is not None:  # the last hidden states, and the head applied a chunk of positions at a time
        backbone, weight = head
        hidden = backbone(
            input_ids=input_ids, attention_mask=attention, position_ids=position_ids, use_cache=False
        ).last_hidden_state
        logp = head_chosen_logp(hidden[:, -(t + 1) : -1], weight, completion_ids, temperature, mask=completion_mask)
        return logp.to(home), None
    # Keep the T+1 last positions: position Lp-1 predicts the first completion token, the last one predicts
    # nothing we sampled and is dropped.
    out = model(
        input_ids=input_ids,
        attention_mask=attention,
        position_ids=position_ids,
        logits_to_keep=last_positions(t + 1, input_ids.shape[1]),
        use_cache=False,
    )
    logits = _tempered(out.logits[:, :-1], temperature)
    logp = selective_log_softmax(logits, completion_ids, mask=completion_mask)
    entropy = token_entropy_from_logits(logits.detach()).to(home) if with_entropy else None
    return logp.to(home), entropy


def last_positions(n: int, length: int) -> torch.Tensor:
    """`logits_to_keep` for the last n of `length` positions, as an index tensor rather than the int n.

    With an int the model slices its hidden states, (b, n, H) strided over the whole length, and matmul cannot
    fold that view into one matrix: it expands the lm_head weight to (b, H, V) and copies it, 113M elements
    for b = 4 on the default model (0.28 s and 0.23 GB here, where the matmul itself takes milliseconds).
    An index tensor gathers a contiguous (b, n, H) and the lm_head runs as one matmul."""
    return torch.arange(length - n, length)


def _repeat_rows(t: torch.Tensor, counts: list[int]) -> torch.Tensor:
    """Row i of t repeated counts[i] times, as expand + cat: its backward is a plain sum per row, so the
    gradient is bitwise reproducible (an index gather's scatter-add backward need not be)."""
    return torch.cat([t[i : i + 1].expand(c, *t.shape[1:]) for i, c in enumerate(counts) if c])


def next_token_logp(model, inputs: dict, cache, targets, mask, temperature: float) -> torch.Tensor:
    """The log-probs (b, T) float32 of targets (b, T) at each position of a forward of `inputs` (input_ids etc.,
    (b, T)) on top of a prompt cache, 0 where mask is 0. A frozen plain head is applied a chunk of positions at a time
    (softmax.head_chosen_logp): no (b, T, vocabulary) logits."""
    head = frozen_head(model)
    if head is not None:
        backbone, weight = head
        hidden = backbone(**inputs, **{cache_kwarg(backbone): cache}).last_hidden_state
        return head_chosen_logp(hidden, weight, targets, temperature, mask=mask)
    logits = _tempered(model(**inputs, **{cache_kwarg(model): cache}).logits, temperature)
    return selective_log_softmax(logits, targets, mask=mask)


class PromptPass:
    """The prompt half of the policy forward: every distinct prompt through the model once, its keys and
    values (every layer) and its last position's logits (they score a completion's first token) kept for
    any number of `logprobs` calls on completions of those prompts. The G samples of a group share their
    prompt, so only their completions run per row: with prompts about twice as long as completions, about a
    third of the tokens of `completion_logprobs` on the same rows, for the same log-probs.

    With split_graph (and gradients on), the kept tensors are detached leaves: each micro-batch's backward
    stops at them and accumulates their gradients, and `backward()` then runs the prompt forward's backward
    once. So a micro-batch can hold rows of any prompts, sorted by length rather than kept by group, while
    every prompt still runs once a step and the gradient is the same as one backward through everything.
    The prompt forward's activations stay alive until `backward()`: prompts x their length, not completions.

    A model whose cache is not keys and values alone (Qwen3.5's gated delta-net layers keep a convolution and a
    recurrent state per row: `shares_prompts` is False) runs each row whole instead, prompt and completion
    (completion_logprobs): the same log-probs, the prompts' tokens once a row.
    """

    def __init__(self, model, prompts: list[list[int]], *, pad_id: int, split_graph: bool = False):
        from transformers import DynamicCache

        self.index: dict[tuple, int] = {}
        for p in prompts:
            self.index.setdefault(tuple(p), len(self.index))
        self._graph: list[tuple[torch.Tensor, torch.Tensor]] = []
        self.pad_id, self.config = pad_id, model.config
        self.shared = shares_prompts(model)
        if not self.shared:
            return
        none = torch.zeros(len(self.index), 0, dtype=torch.long)  # prompts alone: no completion columns
        device = model_device(model)
        ids, self.attention, positions = (
            x.to(device) for x in pack_rows([list(p) for p in self.index], none, none, pad_id)
        )
        cache = DynamicCache()
        first = model(
            input_ids=ids,
            attention_mask=self.attention,
            position_ids=positions,
            **{cache_kwarg(model): cache},
            use_cache=True,
            logits_to_keep=last_positions(1, ids.shape[1]),
        ).logits[:, -1]
        # a decoder of full attention layers: each cache layer has keys and values (transformers' type allows others)
        outputs = [first] + [t for layer in cache.layers for t in (layer.keys, layer.values)]  # type: ignore[union-attr]
        if split_graph and torch.is_grad_enabled():
            leaves = [o.detach().requires_grad_() for o in outputs]
            self._graph = list(zip(outputs, leaves))
            outputs = leaves
        self.first, self.kv = outputs[0], list(zip(outputs[1::2], outputs[2::2]))

    def logprobs(
        self, model, prompts, completion_ids, completion_mask, *, temperature: float = 1.0, attend=None
    ) -> torch.Tensor:
        """Log-probs of b completions of this pass's prompts: prompts b lists of ids (each one of the pass's);
        completion_ids, completion_mask (the scored tokens), attend (the real tokens; None: the scored ones): (b, T).
        Returns (b, T) float32, 0 where not scored."""
        from transformers import DynamicCache

        if not self.shared:  # each row whole
            return completion_logprobs(
                model,
                prompts,
                completion_ids,
                completion_mask,
                pad_id=self.pad_id,
                temperature=temperature,
                attend=attend,
            )[0]

        home, device = completion_ids.device, model_device(model)
        completion_ids, completion_mask = completion_ids.to(device), completion_mask.to(device)
        attend = attend.to(device) if attend is not None else None
        row_prompt = [self.index[tuple(p)] for p in prompts]
        order = sorted(range(len(prompts)), key=lambda r: row_prompt[r])  # rows of one prompt side by side
        inverse = torch.empty(len(order), dtype=torch.long)
        inverse[torch.tensor(order)] = torch.arange(len(order))
        inverse = inverse.to(device)
        counts = [row_prompt.count(u) for u in range(len(self.index))]
        cache = DynamicCache(config=self.config)
        for layer, (k, v) in zip(cache.layers, self.kv):  # each row gets its prompt's keys and values
            layer.update(_repeat_rows(k, counts), _repeat_rows(v, counts))  # type: ignore[union-attr]  # as above
        # The completions of every row (in prompt order), attending to their prompt through the cache.
        # It runs even for 1-token rows (FSDP: every rank must make the same forward calls); the last position
        # predicts nothing that is scored and is given a zero mask.
        ids, mask = completion_ids[order], (completion_mask[order] > 0).long()
        seen = mask if attend is None else (attend[order] > 0).long()
        logp_first = selective_log_softmax(
            _tempered(_repeat_rows(self.first, counts), temperature), ids[:, 0], mask=mask[:, 0]
        )
        prompt_rows = _repeat_rows(self.attention, counts)
        att = torch.cat([prompt_rows, seen], dim=1)
        positions = (prompt_rows.sum(-1, keepdim=True) + seen.cumsum(-1) - 1).clamp(min=0)
        # position j scores token j + 1, and only where it was sampled: padding costs no vocabulary work
        shift = lambda x: torch.cat([x[:, 1:], torch.zeros_like(x[:, :1])], dim=1)  # noqa: E731
        inputs = dict(input_ids=ids, attention_mask=att, position_ids=positions, use_cache=True)
        logp_rest = next_token_logp(model, inputs, cache, shift(ids), shift(mask), temperature)[:, :-1]
        return torch.cat([logp_first[:, None], logp_rest], dim=1)[inverse].to(home)

    def backward(self) -> None:
        """With split_graph: the prompt forward's backward, from the gradients the micro-batches left on its
        keys, values and logits. A no-op otherwise. An output that needs no gradient is skipped: with LoRA on some
        projections only (TRL recipes' q_proj, v_proj), the first layer's keys depend on frozen weights alone."""
        pairs = [(out, leaf.grad) for out, leaf in self._graph if leaf.grad is not None and out.requires_grad]
        if pairs:
            torch.autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
        self._graph = []


def shares_prompts(model) -> bool:
    """Whether every layer of the model caches keys and values (what PromptPass shares among a prompt's rows), as
    transformers builds the model's cache: False where a layer keeps another state (linear attention, Mamba)."""
    from transformers import DynamicCache

    return all(hasattr(layer, "keys") for layer in DynamicCache(config=base_model(model).config).layers)


def _tempered(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """logits / temperature where the temperature tempers them (softmax.tempers)."""
    return logits / temperature if tempers(temperature) else logits
