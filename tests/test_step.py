"""The step's own pieces: the learning-rate schedule (transformers' warm-up + constant / cosine) by hand, and its
exact resume."""

import math

import pytest
import torch

from rlvr.config import Config, resolve
from rlvr.training.step import make_scheduler


def lrs(schedule: str, warmup: int, steps: int, n: int, state=None):
    train = Config.from_dict(
        resolve(None, [f"train.lr_schedule={schedule}", f"train.warmup_steps={warmup}", f"train.steps={steps}"])
    ).train
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    sched = make_scheduler(opt, train)
    if state is not None:
        sched.load_state_dict(state)
    out = []
    for _ in range(n):
        out.append(sched.get_last_lr()[0])
        opt.step()
        sched.step()
    return out, sched.state_dict()


@pytest.mark.parametrize(
    "schedule, expected",
    [
        # linear warm-up over 2 steps (the first at 0, as transformers counts), then flat
        ("constant", [0.0, 0.5, 1.0, 1.0, 1.0, 1.0, 1.0]),
        # then half a cosine from 1 to 0 over the 4 steps left: 0.5 (1 + cos(pi (s - 2) / 4))
        ("cosine", [0.0, 0.5, 1.0, 0.5 * (1 + math.cos(math.pi / 4)), 0.5, 0.5 * (1 + math.cos(3 * math.pi / 4)), 0.0]),
    ],
)
def test_schedule_by_hand(schedule, expected):
    got, _ = lrs(schedule, warmup=2, steps=6, n=7)
    assert got == pytest.approx(expected, abs=1e-12)


def test_no_warmup_keeps_the_full_rate_from_the_first_step():
    assert lrs("constant", warmup=0, steps=5, n=3)[0] == [1.0, 1.0, 1.0]
    assert lrs("cosine", warmup=0, steps=4, n=3)[0] == pytest.approx([1.0, 0.5 * (1 + math.cos(math.pi / 4)), 0.5])


def test_a_resumed_schedule_continues_exactly():
    whole, _ = lrs("cosine", warmup=2, steps=8, n=8)
    first, state = lrs("cosine", warmup=2, steps=8, n=3)
    rest, _ = lrs("cosine", warmup=2, steps=8, n=5, state=state)
    assert first + rest == whole


def test_the_budget_bar_follows_the_step_rate_both_ways():
    """With a time budget the progress bar's total is the steps the budget leaves room for at the mean step time so
    far: it shrinks when steps are slow and grows back when they get faster (completions shorten), never past
    train.steps."""
    import io
    from types import SimpleNamespace

    from tqdm import tqdm

    from rlvr.training.loop import _budget_eta

    train = SimpleNamespace(time_budget_min=1.0, steps=100)
    bar = tqdm(total=100, file=io.StringIO(), disable=False)
    bar.n = 10
    _budget_eta(bar, train, steps_done=10, elapsed_s=30.0)  # 3 s a step, 30 s left: the one in flight + 10 more
    assert bar.total == 10 + 1 + 10
    bar.n = 20
    _budget_eta(bar, train, steps_done=20, elapsed_s=40.0)  # 2 s a step now, 20 s left
    assert bar.total == 20 + 1 + 10
    _budget_eta(bar, train, steps_done=20, elapsed_s=59.0)  # 1 s left, under a step: none more
    assert bar.total == 20 + 1
    _budget_eta(bar, train, steps_done=20, elapsed_s=0.5)  # nearly the whole budget left: capped at train.steps
    assert bar.total == 100


@pytest.mark.parametrize(
    "step_s, budget_min, steps",
    [
        (300.0, 15.0, 3),  # 5-minute steps in 15 minutes: 3, ending at minute 15 (not 4 that start before it)
        (310.0, 15.0, 2),  # a little longer: the third would end at 15.5 min, so 2
        (5.19, 9.0, 104),  # the main job's quiet rate: 104 steps in 540 s
        (700.0, 10.0, 2),  # a first step past the budget: nothing measured before it, so the second is the last
    ],
)
def test_the_time_budget_stops_before_a_step_that_would_end_past_it(step_s, budget_min, steps):
    """Steps of a constant length run through the loop's rule (rlvr.training.loop.last_in_budget): the run stops
    after the last step that ends inside the budget, so it never overshoots by a whole step."""
    from rlvr.training.loop import last_in_budget

    done = 0
    while True:
        last = last_in_budget(budget_min, done * step_s, done)
        done += 1
        if last:
            break
    assert done == steps
    assert done * step_s <= 60 * budget_min or step_s > 60 * budget_min
    assert last_in_budget(0.0, 1e9, 100) is False  # no budget: never
