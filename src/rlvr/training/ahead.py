"""Rollouts sampled ahead (`rollout.max_staleness: k`, k >= 1): a thread samples the next steps' batches while the
trainer updates. k = 0 never builds this: the step samples from the weights it trains (rlvr.training.step).

The schedule is fixed, not "whatever is ready", so a seeded run is reproducible and a resume exact. Version v is the
policy after v updates (step s trains while the policy is version s). Batch s is sampled from version
max(floor, s - k) (floor = 0 on a fresh run): the batch of step s + k is sampled from the weights step s trains with,
while it trains; steps 0 .. k-1 all sample from the start weights. The sampling thread, for s = start, start + 1, ...:
waits until that version is published (time/wait_weights_s), copies its trainable tensors into its own copy of the
policy (the frozen weights are shared, never written), syncs the sampler from that copy, then builds the batch exactly
as the synchronous step does (rlvr.training.step.sample_batch: the step's seeded generator, dynamic sampling,
advantages) and shows it to the prompt stream. Every stream call is made on that thread, in the synchronous order
(take s, observe s, take s + 1, ...), so the prompts and a curriculum's estimates are those of a synchronous run;
only the weights that sampled each batch differ. The sampler is synced before every batch, so it carries nothing from
one batch to the next (a prefix cache, say) and a batch depends only on its version, its step and the stream.

The trainer takes batch s (time/wait_rollouts_s: how long it waited), drops every row more than k versions old
(none, on this schedule; async/stale_rows counts them), updates on the rest, then publishes version s + 1 (a copy of
the trainable tensors: a LoRA adapter is small, full fine-tuning copies the weights). Each row records its version
(StepBatch.versions); the loss takes the sampler's log-probs of those rows, as on the synchronous step, through the
configured rollout correction (algorithm.rollout_correction), which is what makes the older weights' samples sound.

Resume: a checkpoint after d updates saves the versions the batches d .. d + k - 1 are sampled from
(AHEAD_FILE, max(floor, d - k) .. d - 1) and the stream as it was after batch d - 1; the resumed run re-samples those
batches from them, the same rows bit for bit. Nothing sampled is checkpointed.

Validation (log.eval_every) borrows the sampler between two batches, syncs it to the trainer's current weights and
decodes greedily, as on the synchronous step. A thread, not a process: torch releases the GIL inside its kernels, and
a thread shares the frozen weights and the tokenizer for free. One rank only: the sampling thread's collectives
(dynamic sampling's counts) would interleave with the trainer's gradient all-reduce.
"""

from __future__ import annotations

import copy
import functools
import queue
import threading
import time
from pathlib import Path

import torch

from rlvr.config import ConfigError
from rlvr.training import distributed
from rlvr.training.batch import StepBatch, select_rows
from rlvr.training.step import sample_batch

AHEAD_FILE = "ahead.safetensors"  # in a checkpoint: "<version>/<index>" -> a trainable tensor of that version
THREAD_NAME = "rlvr-sampling-ahead"


def check(cfg, comm) -> None:
    """Refuse what sampling ahead cannot do, before a model loads."""
    if cfg.rollout.max_staleness and comm.world > 1:
        raise ConfigError(
            f"rollout.max_staleness={cfg.rollout.max_staleness} runs on one rank, not {comm.world}: set it to 0 "
            "under torchrun (the sampling thread's collectives would interleave with the trainer's)"
        )


def start(state, step: int, checkpoint: Path | None = None):
    """The running sampler-ahead for a loop starting at `step` (resumed from `checkpoint`), or None when k = 0."""
    if not state.cfg.rollout.max_staleness:
        return None
    # the versions the pending batches of a resumed run sample from; none on a fresh run, or from a checkpoint of a
    # synchronous run: then the first batches sample the start weights (version `step`, the floor)
    saved = load_versions(checkpoint / AHEAD_FILE) if checkpoint is not None else {}
    return Ahead(state, state.cfg.rollout.max_staleness, step, {**saved, step: trainable(state.model)})


def trainable(model) -> list[torch.Tensor]:
    """A copy of the model's trainable tensors, in parameter order: one published version."""
    return [p.detach().clone() for p in model.parameters() if p.requires_grad]


def load_versions(path: Path) -> dict[int, list[torch.Tensor]]:
    if not path.exists():
        return {}
    from safetensors.torch import load_file

    out: dict[int, dict[int, torch.Tensor]] = {}
    for key, value in load_file(path).items():
        version, index = (int(x) for x in key.split("/"))
        out.setdefault(version, {})[index] = value
    return {v: [tensors[i] for i in sorted(tensors)] for v, tensors in out.items()}


def drop_stale(batch: StepBatch, step: int, k: int) -> tuple[StepBatch, int]:
    """(the rows sampled at most k versions before `step`, how many were older). The kept rows keep their
    advantages (a group is sampled by one version, so a group is kept or dropped whole) and `generated`."""
    if batch.versions is None:  # sampled by the current weights (the synchronous step): none is stale
        return batch, 0
    stale = step - batch.versions > k
    if not bool(stale.any()):
        return batch, 0
    rows = (~stale).nonzero().flatten().tolist()
    kept = select_rows(batch, rows)
    kept.advantages = batch.advantages[rows] if batch.advantages is not None else None
    kept.generated = batch.all_generated
    kept.stats["dynamic_sampling/kept_groups"] = len(set(kept.group_ids.tolist()))
    return kept, int(stale.sum())


def staleness_figures(step: int, versions: torch.Tensor, dropped: int) -> dict:
    """async/* of a step from the versions of every row generated for it."""
    age = (step - versions).float()
    return {
        "async/staleness_mean": float(age.mean()) if len(age) else 0.0,
        "async/staleness_max": float(age.max()) if len(age) else 0.0,
        "async/stale_rows": dropped,
    }


class Ahead:
    """The sampling thread and its two hand-offs: versions (trainer -> thread) and batches (thread -> trainer)."""

    def __init__(self, state, k: int, step: int, versions: dict[int, list[torch.Tensor]]):
        self.state, self.k, self.floor = state, k, min(versions)
        self.versions = dict(versions)
        self.stream_states: dict[int, dict] = {}  # step -> the stream's state after that step's batch
        self.ready = threading.Condition()
        self.batches: queue.Queue = queue.Queue()
        self.sampler_lock = threading.Lock()  # the sampler: one batch, or one validation, at a time
        self.closed = False
        self._figures: dict = {}
        model = state.model
        frozen = {id(p): p for p in model.parameters() if not p.requires_grad}
        self.copy = copy.deepcopy(model, memo=frozen).eval()  # shares the frozen tensors, owns the trainable ones
        self.copy_params = [p for p in self.copy.parameters() if p.requires_grad]
        self.thread = threading.Thread(
            target=self._run, args=(step, state.cfg.train.steps), name=THREAD_NAME, daemon=True
        )
        self.thread.start()

    def version_for(self, step: int) -> int:
        return max(step - self.k, self.floor)

    # the trainer's side

    def publish(self, version: int) -> None:
        """The trainer's weights after `version` updates; versions no pending batch or checkpoint needs are let go."""
        weights = trainable(self.state.model)
        with self.ready:
            self.versions[version] = weights
            for old in [v for v in self.versions if v < version - self.k]:
                del self.versions[old]
            self.ready.notify_all()

    def take(self, step: int) -> StepBatch:
        """Batch `step`, waiting for it, its stale rows dropped."""
        t0 = time.perf_counter()
        while True:
            try:
                item = self.batches.get(timeout=1.0)
                break
            except queue.Empty:
                if not self.thread.is_alive():
                    raise RuntimeError("the sampling-ahead thread ended without a batch") from None
        if isinstance(item, BaseException):
            raise item
        got, batch, stream_state, waited = item
        assert got == step, f"sampled-ahead batch {got} arrived for step {step}"  # one thread, steps in order
        self.stream_states = {s: v for s, v in self.stream_states.items() if s >= step - 1} | {step: stream_state}
        versions = batch.all_generated.versions
        batch, dropped = drop_stale(batch, step, self.k)
        self._figures = {
            **staleness_figures(step, versions, dropped),
            "time/wait_rollouts_s": time.perf_counter() - t0,
            "time/wait_weights_s": waited,
        }
        return batch

    def figures(self, step: int) -> dict:
        """The step's async/* and wait figures (docs/metrics.md)."""
        return dict(self._figures)

    def validate(self, run) -> dict:
        """run(state) on the sampler synced to the trainer's current weights, between two batches."""
        with self.sampler_lock:
            distributed.sync_sampler(self.state.comm, self.state.sampler, self.state.model)
            return run(self.state)

    def checkpoint(self, done: int) -> tuple[dict, dict]:
        """(the stream's state after batch done - 1, {AHEAD_FILE: the versions batches done .. done + k - 1 are
        sampled from}) for a checkpoint after `done` updates."""
        wanted = {self.version_for(s) for s in range(done, done + self.k)} - {done}
        with self.ready:
            tensors = {f"{v}/{i}": t for v in sorted(wanted) for i, t in enumerate(self.versions[v])}
        return self.stream_states[done - 1], {AHEAD_FILE: tensors}

    def close(self) -> None:
        """Stop after the batch in flight (if any) and wait for the thread."""
        with self.ready:
            self.closed = True
            self.ready.notify_all()
        self.thread.join()

    # the sampling thread

    def _run(self, first: int, end: int) -> None:
        try:
            for step in range(first, end):
                version = self.version_for(step)
                t0 = time.perf_counter()
                with self.ready:
                    self.ready.wait_for(functools.partial(self._arrived, version))
                    if self.closed:
                        return
                    weights = self.versions[version]
                waited = time.perf_counter() - t0
                batch = self._sample(step, version, weights)
                self.state.stream.observe(step, batch.all_generated)
                self.batches.put((step, batch, copy.deepcopy(self.state.stream.state_dict()), waited))
        except BaseException as e:  # the trainer raises it at its next take
            self.batches.put(e)

    def _arrived(self, version: int) -> bool:
        """Closed, or the weights of `version` published: what the sampling thread waits for."""
        return self.closed or version in self.versions

    def _sample(self, step: int, version: int, weights: list[torch.Tensor]) -> StepBatch:
        with self.sampler_lock:
            with torch.no_grad():
                for p, w in zip(self.copy_params, weights):
                    p.copy_(w)
            distributed.sync_sampler(self.state.comm, self.state.sampler, self.copy)
            batch = sample_batch(self.state, step)
        for b in {id(batch): batch, id(batch.all_generated): batch.all_generated}.values():
            b.versions = torch.full((len(b),), version, dtype=torch.long)
        return batch


__all__ = ["AHEAD_FILE", "Ahead", "check", "drop_stale", "start", "staleness_figures"]
