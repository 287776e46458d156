"""The scheduler in process: a cancelled request (its client gone) costs nothing, the queue's count returns to 0,
and the next request is answered; admission refuses past the bound with a Retry-After."""

import pytest

from rlvr.serve.items import BadRequest
from rlvr.serve.scoring import Scheduler, build_scorers
from rlvr.tasks.base import Problem


def test_a_cancelled_request_leaves_the_scorer_serving():
    scheduler = Scheduler(build_scorers([("verifier", "math")], workers=0, timeout_s=5.0), max_queue_items=8)
    try:
        scheduler.admit(2)
        gone = scheduler.submit("verifier:math", ["\\boxed{2}", "\\boxed{3}"], [Problem("a", "", "2")] * 2)
        gone.cancel()
        scheduler.admit(1)
        answer = scheduler.submit("verifier:math", ["\\boxed{4}"], [Problem("b", "", "4")]).result(timeout=60)
        assert [(a["status"], a["reward"]) for a in answer] == [("correct", 1.0)]
        assert scheduler.pending == 0
    finally:
        scheduler.close()


def test_admission_is_bounded():
    scheduler = Scheduler(build_scorers([("verifier", "math")], workers=0, timeout_s=5.0), max_queue_items=3)
    try:
        scheduler.admit(3)
        with pytest.raises(BadRequest) as e:
            scheduler.admit(1)
        assert (e.value.status, e.value.retry_after) == (429, 1)
        assert e.value.message == "queue full: 3 items waiting (limit 3); retry later"
        scheduler.release(3)
        scheduler.admit(1)
        assert scheduler.pending == 1
    finally:
        scheduler.close()
