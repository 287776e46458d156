"""The choice of verification engine is validated before anything runs. The Ray engine itself runs on a real Ray
instance in the engines tier (tests/test_engines_ray.py, `make test-engines`)."""

import pytest

from rlvr.config import ConfigError, as_config
from rlvr.tasks.base import Problem
from rlvr.verifiers.math import MathVerifier
from rlvr.verifiers.pool import score_batch


def test_unknown_engine_is_a_config_error():
    with pytest.raises(ConfigError, match=r"^config key 'reward.engine' = 'spark'; choose from local, ray$"):
        as_config({"reward": {"terms": [{"name": "correct", "kind": "math"}], "engine": "spark"}})
    with pytest.raises(ValueError, match="unknown verification engine"):
        score_batch(MathVerifier(), ["x"], [Problem("0", "q", "4")], workers=1, engine="spark")
