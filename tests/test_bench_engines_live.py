"""Each engine's real worker, end to end through `rlvr bench --vs ENGINE`, on the default model: one small batch,
one sync. Slow tier, and only where the engine's venv is given ($RLVR_<ENGINE>_PYTHON; recipes in
docs/performance.md): the fast tier never has the engines."""

import argparse
import json
import os

import pytest

from rlvr_bench import bench
from rlvr_bench.engines import ENGINES

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("engine", list(ENGINES))
def test_engine_samples_a_batch_and_syncs(engine, tmp_path):
    python = os.environ.get(f"RLVR_{engine.upper()}_PYTHON")
    if not python:
        pytest.skip(f"RLVR_{engine.upper()}_PYTHON not set")
    parser = argparse.ArgumentParser()
    bench.add_parser(parser.add_subparsers(dest="verb"))
    out = tmp_path / "out.json"
    args = parser.parse_args(
        [
            "bench",
            "--vs",
            engine,
            "-P",
            "2",
            "-G",
            "2",
            "--max-new-tokens",
            "16",
            "--steps",
            "1",
            "--warmup",
            "0",
            "--syncs",
            "1",
            "--probe-size",
            "256",
            "--json",
            str(out),
            f"--{engine}-python",
            python,
            "--work-dir",
            str(tmp_path / "models"),
        ]
    )
    assert bench.run(args) == 0
    result = json.loads(out.read_text())
    for key, side in result["sides"].items():
        batch = result["steps"][key][0]
        assert batch["rows"] == 4 and sum(batch["lengths"]) == batch["gen_tokens"] > 0
        assert max(batch["lengths"]) <= 16 and side["sync_s"] > 0 and side["tok_s"] > 0
        if side["logp_mean"] is not None:  # a sampled token's log-prob is below 0 and not absurdly low
            assert -15 < side["logp_mean"] < 0
