"""The trainable model: load it (embedded GGUF, folder or hub id), add LoRA, compute log-probs, update it.

load       the policy and tokenizer into process memory, LoRA, save/merge; `build_policy` from the config
logprobs   per-token log-probs of completions (each prompt run once a step)
update     one policy update over a step's batch: length-sorted micro-batches, exact global normalisation
memory     the update's out-of-memory errors named by shape and setting; freed pages handed back to the OS
fastpath   the update's forward on a CPU under bf16 autocast (fewer casts, fused LoRA), checkpointing
attention  the update's attention on a CPU: grouped-query matmuls, float32 softmax, hand-written backward

In: a model name and settings; a step's batch. Out: a model whose weights moved, and the update's figures.
"""
