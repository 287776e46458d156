"""`Comm`: this process's place among the data-parallel ranks and the few collectives the loop needs. On one
process (no torchrun) it is a Comm of one rank and every collective is a no-op, so code written for W ranks runs
unchanged on one (rlvr.training.distributed sets the group up)."""

from __future__ import annotations

import torch
import torch.distributed as dist

# Gradients are summed in flat buckets of this many elements: one collective per bucket, bounded memory.
_BUCKET = 1 << 25
# Rank r's sampling seed is the single-process seed plus r * this: far from any (seed, step) of rank 0.
_RANK_SEED_STRIDE = 1 << 40


class Comm:
    """This process's place among the ranks, and the few collectives the loop needs."""

    def __init__(self, rank: int = 0, world: int = 1, owns_group: bool = False):
        self.rank, self.world, self.owns_group = rank, world, owns_group
        self.sharded = False  # FSDP2 holds the model (shard_model): it reduces gradients itself
        # Collectives run on several ranks, and on a group of one that setup() made (RLVR_DIST_BACKEND under a
        # launcher of one process: one GPU cannot hold two NCCL ranks, yet it can run NCCL's code path); else no-ops.
        self.grouped = world > 1 or owns_group
        backend = dist.get_backend() if self.grouped and dist.is_initialized() else "none"
        # NCCL moves only CUDA tensors; gloo (CPU) moves CPU tensors.
        self.device = torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" else torch.device("cpu")

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def seed_offset(self) -> int:
        return self.rank * _RANK_SEED_STRIDE

    def shard(self, items):
        """This rank's contiguous block of a list (sizes differ by at most one, earlier ranks larger)."""
        items = list(items)
        n, w, r = len(items), self.world, self.rank
        return items[r * n // w : (r + 1) * n // w]

    def all_sum(self, *values) -> list:
        """Sum numbers or 0-d tensors over ranks (in float64, exact for counts); same types back."""
        if not self.grouped:
            return list(values)
        buf = torch.tensor([float(v) for v in values], dtype=torch.float64, device=self.device)
        dist.all_reduce(buf)
        out = buf.cpu().tolist()
        return [torch.tensor(s, dtype=v.dtype) if torch.is_tensor(v) else type(v)(s) for s, v in zip(out, values)]

    def any(self, flag: bool) -> bool:
        """True on every rank when it is True on any: for decisions all ranks must take together."""
        return bool(flag) if not self.grouped else self.all_sum(int(bool(flag)))[0] > 0

    def all_gather(self, obj) -> list:
        """Every rank's object, in rank order (pickled; for per-row data, not for weights)."""
        if not self.grouped:
            return [obj]
        out = [None] * self.world
        dist.all_gather_object(out, obj)
        return out

    def sum_grads(self, params) -> None:
        """Replace each parameter's gradient by its sum over ranks; a missing gradient counts as zero
        (a rank with no trainable rows this step still takes part, and still steps)."""
        if not self.grouped:
            return
        params = [p for p in params if p.requires_grad]
        if self.sharded:  # FSDP reduce-scattered the gradients as a mean over ranks: times W is the sum
            for p in params:
                if p.grad is not None:
                    p.grad.mul_(self.world)
            return
        for p in params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        bucket: list[torch.Tensor] = []
        size = 0
        for p in params:
            if bucket and size + p.numel() > _BUCKET:
                self._sum_bucket(bucket)
                bucket, size = [], 0
            bucket.append(p)
            size += p.numel()
        if bucket:
            self._sum_bucket(bucket)

    def _sum_bucket(self, params) -> None:
        flat = torch.cat([p.grad.reshape(-1).to(self.device) for p in params])
        dist.all_reduce(flat)
        offset = 0
        for p in params:
            n = p.numel()
            p.grad.copy_(flat[offset : offset + n].view_as(p.grad))
            offset += n

    def idle_micro_batches(self, n: int) -> int:
        """Under FSDP every forward and backward is a collective, so every rank must run as many micro-batches
        as the busiest one: how many zero-weight ones this rank adds to its n. 0 without FSDP."""
        return max(self.all_gather(n)) - n if self.sharded else 0

    def broadcast_params(self, params) -> None:
        """Give every rank rank 0's values (the start of a run must be identical everywhere)."""
        if not self.grouped:
            return
        with torch.no_grad():
            for p in params:
                buf = p.detach().to(self.device)
                dist.broadcast(buf, src=0)
                p.copy_(buf)

    def barrier(self) -> None:
        if self.grouped:
            dist.barrier()

    def close(self) -> None:
        """Tear the process group down if `setup` made it."""
        if self.owns_group and dist.is_initialized():
            dist.destroy_process_group()


__all__ = ["Comm"]
