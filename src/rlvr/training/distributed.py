"""Data-parallel training on torch.distributed: the same loop on W ranks, changing nothing but speed.

Launched by `torchrun` (or `accelerate launch`), which sets RANK / WORLD_SIZE / MASTER_ADDR; without them
the run is one rank and every method here is a no-op, so the single-process loop is untouched.

What each rank does in a step (P prompts per step, W ranks):
- every rank draws the same P prompts from the same seeded stream and keeps its contiguous block of
  P/W (`Comm.shard`): a group never straddles ranks, so group advantages stay local, and the rank-order
  concatenation of the blocks is the single-process batch, row for row;
- dynamic sampling runs the same number of rounds on every rank and keeps informative groups in that
  global order, so the kept groups are exactly those a single process would keep from the same rollouts
  (rlvr.training.batch.collect, with this rank's Comm);
- the loss is normalised by the token / sequence counts of the global batch (all-reduced), so each rank's
  loss is its share of the global loss and the sum of the ranks' gradients is the global gradient;
  gradients are summed after backward (one flat all-reduce; exact, and cheap for a LoRA adapter);
- the global batch is all-gathered for the metrics line, the samples file and the curriculum, which
  therefore see what a single process would see; rank 0 alone writes files and checkpoints.

Shapes: B rows on this rank, T completion positions; counts are 0-d tensors.
"""

from __future__ import annotations

import atexit
import dataclasses
import os

import torch
import torch.distributed as dist

from rlvr.errors import ConfigError
from rlvr.policy.load import base_model
from rlvr.training.batch import StepBatch, concat
from rlvr.training.comm import Comm

# The process group's backend, when the default (nccl where CUDA is available, else gloo) is not wanted.
BACKEND_ENV = "RLVR_DIST_BACKEND"
BACKENDS = ("gloo", "nccl")
# Stats where the global value is the max over ranks: wall times (the step waits for the slowest rank), and
# the round count (every rank runs the same rounds).
_MAX_STATS = ("time/generate", "time/verify", "time/teacher", "dynamic_sampling/rounds")


def choose_backend(asked: str, cuda: bool) -> str:
    """The process group's backend: `asked` (RLVR_DIST_BACKEND) when set, else nccl where CUDA is available and
    gloo elsewhere. NCCL moves only CUDA tensors, so nccl without CUDA is refused here, not at the first collective."""
    if not asked:
        return "nccl" if cuda else "gloo"
    if asked not in BACKENDS:
        raise ConfigError(
            f"{BACKEND_ENV}={asked}: choose gloo or nccl (unset: nccl where CUDA is available, else gloo)"
        )
    if asked == "nccl" and not cuda:
        raise ConfigError(f"{BACKEND_ENV}=nccl: CUDA is not available in this process; use gloo or unset it")
    return asked


def setup() -> Comm:
    """The Comm of this process: joins the group that torchrun describes in the environment (choose_backend), or
    reuses one already initialised; a world of one when there is neither. With RLVR_DIST_BACKEND set, a launcher's
    world of one process joins a group of one too, whose collectives run for real: how benchmarks/gpu_check.sh takes
    the update through NCCL on one GPU."""
    if dist.is_available() and dist.is_initialized():
        return Comm(dist.get_rank(), dist.get_world_size())
    world, asked = int(os.environ.get("WORLD_SIZE", "1")), os.environ.get(BACKEND_ENV, "")
    if world <= 1 and not (asked and "WORLD_SIZE" in os.environ):
        return Comm()
    backend = choose_backend(asked, torch.cuda.is_available())
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group(backend)
    # Torn down at exit, not after train(): a second train() in the same process (rlvr run) reuses the group,
    # where re-initialising one under torchrun's shared store fails.
    atexit.register(_destroy)
    return Comm(dist.get_rank(), dist.get_world_size(), owns_group=True)


def _destroy() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def shard_model(model, comm: Comm):
    """FSDP2 (torch's `fully_shard`) over the ranks: each decoder layer, then the root, for models whose weights,
    gradients and optimizer state do not fit one device. Gradients end up summed over ranks (our losses are
    per-rank shares of the global loss; see Comm.sum_grads), so the update is that of data parallel. Whole-weight
    reads and writes of the sharded model: rlvr.rundir.fsdp. The trainer calls this under `train.fsdp: true`."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh(comm.device.type, (comm.world,))
    base = base_model(model)
    names = set(getattr(base, "_no_split_modules", None) or ())  # transformers names its decoder layer class here
    for layer in [m for m in model.modules() if type(m).__name__ in names]:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    # FSDP's default mean over ranks is kept (its sum options need PREMUL_SUM or are ignored on gloo);
    # Comm.sum_grads turns the mean into the sum
    comm.sharded = True
    return model


def check_resume(comm: Comm, loop_state: dict) -> None:
    """A run resumes on the number of ranks it was saved with: the rank count decides which prompts each
    rank samples (and with which seed), so another count could not redo the same steps."""
    saved = int(loop_state.get("world_size", 1))
    if saved != comm.world:
        raise ConfigError(f"--resume: the run was saved on {saved} rank(s); relaunch it on {saved}, not {comm.world}")


def sync_sampler(comm: Comm, sampler, model) -> None:
    """A local sampler holds its own copy of the weights: every rank syncs its own. Remote servers are shared
    by every rank (`sampler.shared`): rank 0 pushes the new weights once, and no rank samples before they
    are served. Under FSDP every rank gathers the whole weights together: the adapter that rank 0 pushes, or
    (local samplers) the merged weights in `merged_state_dict`."""
    if getattr(sampler, "shared", False):
        from rlvr.rundir.fsdp import gather_trainable

        sampler.sync(model, push=comm.is_main, state_dict=gather_trainable(model) if comm.sharded else None)
        comm.barrier()
    else:
        sampler.sync(model)


def gather_batch(comm: Comm, batch: StepBatch, pad_id: int) -> StepBatch:
    """The step's global batch on every rank, as one process would have built it: rows in rank order,
    groups renumbered, counts summed, wall times maxed; `generated` merged the same way.
    On one rank, the batch itself."""
    if comm.world == 1:
        return batch
    local = dataclasses.replace(batch, generated=None, rounds=None)
    parts = comm.all_gather((local, batch.rounds))
    merged = _merge([p[0] for p in parts], pad_id)
    if parts[0][1] is not None:  # dynamic sampling: round k of every rank, then round k + 1, ...
        rounds = [[p[1][k] for p in parts] for k in range(len(parts[0][1]))]
        merged.generated = concat([_merge(r, pad_id) for r in rounds], pad_id)
    return merged


def _merge(batches: list[StepBatch], pad_id: int) -> StepBatch:
    merged = concat(batches, pad_id)
    advantages = [b.advantages for b in batches if b.advantages is not None]
    if len(advantages) == len(batches) and advantages[0].dim() == 2:  # per token: padded to the merged T
        t = merged.completion_ids.shape[1]
        advantages = [torch.nn.functional.pad(a, (0, t - a.shape[1])) for a in advantages]
    merged.advantages = torch.cat(advantages) if len(advantages) == len(batches) else None
    for key in _MAX_STATS:
        if key in merged.stats:
            merged.stats[key] = max(b.stats.get(key, 0.0) for b in batches)
    return merged


__all__ = ["Comm", "setup", "shard_model", "check_resume", "sync_sampler", "gather_batch"]
