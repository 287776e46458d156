"""Checkpoints are trusted only when complete; restoring gives back weights, optimizer and RNG exactly."""

import random

import torch

from rlvr.rundir import checkpoint as ckpt


def small_setup(seed=0):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
    model[0].weight.requires_grad_(False)  # frozen parts are not saved (as with a LoRA base)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=0.1)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 / (s + 1))
    return model, opt, sched


def one_step(model, opt, sched):
    loss = model(torch.ones(2, 4)).pow(2).sum()
    loss.backward()
    opt.step()
    opt.zero_grad()
    sched.step()


def test_round_trip_restores_training_exactly(tmp_path):
    model, opt, sched = small_setup()
    one_step(model, opt, sched)
    random.seed(7)
    path = ckpt.save_checkpoint(tmp_path, 1, model=model, optimizer=opt, scheduler=sched, loop_state={"position": 4})
    expected_draw = random.random()
    one_step(model, opt, sched)
    after = [p.detach().clone() for p in model.parameters()]

    model2, opt2, sched2 = small_setup(seed=1)
    model2[0].weight.data.copy_(model[0].weight.data)  # the frozen base comes from the model, not the checkpoint
    state = ckpt.load_checkpoint(path, model=model2, optimizer=opt2, scheduler=sched2)
    assert state == {"position": 4}
    assert random.random() == expected_draw
    one_step(model2, opt2, sched2)
    for a, b in zip(after, model2.parameters()):
        assert torch.equal(a, b)


def test_incomplete_or_corrupt_checkpoints_are_not_trusted(tmp_path):
    model, opt, sched = small_setup()
    p1 = ckpt.save_checkpoint(tmp_path, 1, model=model, optimizer=opt, scheduler=sched, loop_state={}, keep=5)
    p2 = ckpt.save_checkpoint(tmp_path, 2, model=model, optimizer=opt, scheduler=sched, loop_state={}, keep=5)
    assert ckpt.latest_complete(tmp_path) == p2
    with open(p2 / "trainable.safetensors", "r+b") as f:  # a truncated weights file
        f.truncate(10)
    assert not ckpt.is_complete(p2)
    assert ckpt.latest_complete(tmp_path) == p1
    (p1 / ckpt.MANIFEST).unlink()  # killed before the manifest was written
    assert ckpt.latest_complete(tmp_path) is None
    (tmp_path / ".tmp-step-3").mkdir()  # a half-written temporary folder is never listed
    assert [p.name for p in ckpt.list_checkpoints(tmp_path)] == ["step-1", "step-2"]


def test_keeps_only_the_last_k(tmp_path):
    model, opt, sched = small_setup()
    for step in range(1, 5):
        ckpt.save_checkpoint(tmp_path, step, model=model, optimizer=opt, scheduler=sched, loop_state={}, keep=2)
    assert [p.name for p in ckpt.list_checkpoints(tmp_path)] == ["step-3", "step-4"]
