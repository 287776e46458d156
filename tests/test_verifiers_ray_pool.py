"""The Ray engine of the verifier pool gives the local pool's verdicts and per-item deadlines. Ray is an optional
extra: without it these tests skip (the choice of engine is still validated)."""

import time

import pytest

from rlvr.config import ConfigError
from rlvr.tasks.base import Problem
from rlvr.verifiers.compose import build_reward
from rlvr.verifiers.math import MathVerifier
from rlvr.verifiers.pool import score_batch

MATH_CASES = [r"\boxed{4}", r"\boxed{5}", "4", r"\boxed{2^{2^{2^{2^2}}}}", r"\boxed{3} or \boxed{4}"]


def test_unknown_engine_is_a_config_error():
    with pytest.raises(ConfigError, match="reward.engine='spark'; choose from local, ray"):
        build_reward({"terms": [{"name": "correct", "kind": "math"}], "engine": "spark"})
    with pytest.raises(ValueError, match="unknown verification engine"):
        score_batch(MathVerifier(), ["x"], [Problem("0", "q", "4")], workers=1, engine="spark")


@pytest.fixture(scope="module")
def ray():
    ray = pytest.importorskip("ray", reason="Ray is an optional extra (pip install ray), not installed here")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


class Misbehaving:
    name = "misbehaving"

    def score(self, completion, problem):
        from rlvr.verifiers.base import Verdict

        if completion == "hang":
            time.sleep(60)
        if completion == "raise":
            raise RuntimeError("bug in verifier")
        if completion == "exit":
            import os

            os._exit(3)
        return Verdict("correct", 1.0, completion, "ok")


def test_math_verdicts_match_the_local_pool(ray):
    v = MathVerifier(timeout_s=2.0)
    probs = [Problem(str(i), "q", "4") for i in range(len(MATH_CASES))]
    remote = score_batch(v, MATH_CASES, probs, workers=2, timeout_s=2.0, engine="ray")
    local = score_batch(v, MATH_CASES, probs, workers=2, timeout_s=2.0)
    assert (
        [x.status for x in remote]
        == [x.status for x in local]
        == ["correct", "wrong", "no_answer", "timeout", "multiple_answers"]
    )
    assert [(x.reward, x.extracted) for x in remote[:3]] == [(x.reward, x.extracted) for x in local[:3]]


def test_each_failure_costs_only_its_item(ray):
    import sys

    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import this test module
    items = ["a", "hang", "b", "exit", "c", "raise", "d"]
    t = time.monotonic()
    out = score_batch(Misbehaving(), items, [None] * len(items), workers=2, timeout_s=0.5, engine="ray")
    assert [v.status for v in out] == ["correct", "timeout", "correct", "error", "correct", "error", "correct"]
    assert time.monotonic() - t < 30
