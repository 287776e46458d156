"""Atomic checkpoints and exact resume.

A checkpoint is a folder checkpoints/step-N holding the trainable weights (the LoRA adapter, or the whole
model for a full fine-tune), the optimizer and LR scheduler, every RNG, and the loop's own state (data
position, curriculum, counters). It is written into a temporary folder, a manifest with the checksum of
each file is written last, then the folder is renamed into place: a checkpoint without a valid manifest
is never trusted.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
from pathlib import Path

import torch

MANIFEST = "manifest.json"
# reliability: a manifest must list all of these, so a manifest from a half-written or foreign folder
# (listing fewer files) is not enough to trust it.
REQUIRED = ("trainable.safetensors", "optim.pt", "loop_state.json")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def trainable_state(model) -> dict[str, torch.Tensor]:
    # copies on the CPU, from a policy on any device: the files load anywhere
    return {n: p.detach().to("cpu", copy=True) for n, p in model.named_parameters() if p.requires_grad}


def rng_state() -> dict:
    import numpy as np

    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():  # a policy on a GPU draws dropout there
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    import numpy as np

    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(
    ckpt_root: Path,
    step: int,
    *,
    model,
    optimizer,
    scheduler,
    loop_state: dict,
    keep: int = 2,
    full: tuple[dict, dict] | None = None,
    tensors: dict[str, dict[str, torch.Tensor]] | None = None,
) -> Path:
    """full: (trainable weights, optimizer state) gathered beforehand by every rank when FSDP shards the model
    (rlvr.rundir.fsdp.gather_checkpoint); by default both are read from `model` and `optimizer`. tensors: more
    safetensors files, file name -> tensors (rlvr.training.ahead: the weights its pending batches are sampled from),
    checksummed in the manifest like the rest."""
    from safetensors.torch import save_file

    ckpt_root = Path(ckpt_root)
    final = ckpt_root / f"step-{step}"
    tmp = ckpt_root / f".tmp-step-{step}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    weights, optim = full if full is not None else (trainable_state(model), optimizer.state_dict())
    save_file({k: v.contiguous() for k, v in weights.items()}, tmp / "trainable.safetensors")
    torch.save({"optimizer": optim, "scheduler": scheduler.state_dict(), "rng": rng_state()}, tmp / "optim.pt")
    for name, more in (tensors or {}).items():
        save_file({k: v.contiguous() for k, v in more.items()}, tmp / name)
    (tmp / "loop_state.json").write_text(json.dumps(loop_state))
    files = {p.name: _sha256(p) for p in sorted(tmp.iterdir())}
    (tmp / MANIFEST).write_text(json.dumps({"step": step, "files": files}))
    for p in tmp.iterdir():
        with open(p, "rb") as f:
            os.fsync(f.fileno())
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    _fsync_dir(ckpt_root)  # reliability: make the rename itself durable before older checkpoints are pruned
    _prune(ckpt_root, keep)
    return final


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # platforms that cannot open a folder (Windows): the rename is as durable as it gets
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def is_complete(path: Path) -> bool:
    """True when the manifest exists, lists every REQUIRED file, and each listed file is present with the
    recorded checksum."""
    manifest = Path(path) / MANIFEST
    try:
        files = json.loads(manifest.read_text())["files"]
        if not isinstance(files, dict) or not set(REQUIRED) <= set(files):
            return False
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return all((Path(path) / name).exists() and _sha256(Path(path) / name) == digest for name, digest in files.items())


def list_checkpoints(ckpt_root: Path) -> list[Path]:
    root = Path(ckpt_root)
    if not root.exists():
        return []
    found = [p for p in root.iterdir() if p.is_dir() and p.name.startswith("step-")]
    return sorted(found, key=lambda p: int(p.name.split("-")[1]))


def latest_complete(ckpt_root: Path) -> Path | None:
    for path in reversed(list_checkpoints(ckpt_root)):
        if is_complete(path):
            return path
    return None


def checkpoint_weights(path: Path, model) -> dict[str, torch.Tensor]:
    """The trainable tensors a checkpoint holds, checked to cover every trainable parameter of `model`."""
    from safetensors.torch import load_file

    weights = load_file(Path(path) / "trainable.safetensors")
    missing = [n for n, p in model.named_parameters() if p.requires_grad and n not in weights]
    if missing:
        raise RuntimeError(
            f"checkpoint {path} lacks {len(missing)} trainable tensors (e.g. {missing[0]}); "
            f"was it made with another model or LoRA setting?"
        )
    return weights


def load_trainable(path: Path, model) -> None:
    """Copy a checkpoint's trainable tensors into `model` (not sharded) in place."""
    params = dict(model.named_parameters())
    with torch.no_grad():
        for name, value in checkpoint_weights(path, model).items():
            params[name].copy_(value)


def load_checkpoint(path: Path, *, model, optimizer, scheduler) -> dict:
    """Restore weights, optimizer, scheduler and RNGs in place; return the loop state. A model sharded by FSDP
    takes its shards of the whole tensors: then every rank calls this together."""
    from rlvr.rundir.fsdp import is_sharded, load_full

    path = Path(path)
    # onto the CPU: the optimizer moves its state to each parameter's device, so a GPU run resumes on either
    state = torch.load(path / "optim.pt", weights_only=False, map_location="cpu")
    if is_sharded(model):
        load_full(model, optimizer, checkpoint_weights(path, model), state["optimizer"])
    else:
        load_trainable(path, model)
        optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    set_rng_state(state["rng"])
    return json.loads((path / "loop_state.json").read_text())


def _prune(ckpt_root: Path, keep: int) -> None:
    for old in list_checkpoints(ckpt_root)[:-keep] if keep > 0 else []:
        shutil.rmtree(old, ignore_errors=True)
