"""`rlvr serve` under faults: a full queue (429 + Retry-After), a pool worker SIGKILLed mid-request (its item
`error`, the next request fine, no sandboxed process left), SIGTERM (the request in flight answered, exit 0), and
the hostile code suite through the service (every attack 0, the host untouched, nothing left running)."""

import os
import signal
import tempfile
import threading
import time

import pytest

from rlvr.verifiers.code_attacks import host_damage, hostile_suite
from rlvr.verifiers.sandbox import isolation, sandbox_processes
from serve_util import Service, kill, wait_for

SQ_TESTS = {"tests": ["assert sq(3) == 9"], "entry_point": "sq"}


def sleepy(seconds: float) -> dict:
    """A correct sq that first sleeps: an item that holds its worker for `seconds`."""
    return {
        "completion": f"```python\nimport time\ndef sq(x):\n    time.sleep({seconds})\n    return x * x\n```",
        **SQ_TESTS,
    }


QUICK = {"completion": "```python\ndef sq(x):\n    return x * x\n```", **SQ_TESTS}


def in_background(fn):
    box = {}
    thread = threading.Thread(target=lambda: box.update(result=fn()), daemon=True)
    thread.start()
    return thread, box


def test_a_full_queue_answers_429_with_retry_after_and_then_serves():
    with Service("--verifier", "python_tests", "--max-queue-items", "2", "--max-items", "2", "--workers", "1") as s:
        thread, box = in_background(lambda: s.post("/v1/verify", {"items": [sleepy(2), QUICK]}))
        assert wait_for(lambda: s.get("/healthz")[1]["queue_items"] == 2)
        status, answer, headers = s.post("/v1/verify", {"items": [QUICK]})
        assert status == 429
        assert answer == {"error": "queue full: 2 items waiting (limit 2); retry later"}
        assert int(headers["retry-after"]) >= 1
        thread.join(timeout=120)
        assert box["result"][0] == 200 and [v["status"] for v in box["result"][1]["verdicts"]] == ["correct"] * 2
        status, answer, _ = s.post("/v1/verify", {"items": [QUICK]})
        assert (status, answer["verdicts"][0]["status"]) == (200, "correct")
        assert s.metric('rlvr_serve_rejected_total{reason="queue_full"}') == 1.0


@pytest.mark.skipif(not isolation()["uid"], reason="sandbox processes are found by their own uid (needs root)")
def test_a_worker_killed_mid_request_gives_error_and_the_service_goes_on():
    with Service("--verifier", "python_tests", "--workers", "1", "--timeout-s", "30") as s:
        thread, box = in_background(lambda: s.post("/v1/verify", {"items": [sleepy(20)]}))
        assert wait_for(lambda: s.children() and sandbox_processes(), timeout=60)  # the worker runs the sandbox
        time.sleep(1.5)  # the candidate is asleep inside sq() by now
        kill(s.children())  # the pool's worker, SIGKILL, mid-item
        thread.join(timeout=60)
        status, answer, _ = box["result"]
        assert status == 200
        [verdict] = answer["verdicts"]
        assert (verdict["status"], verdict["reward"]) == ("error", 0.0)
        assert verdict["detail"] == "worker died while scoring (exit code -9)"
        status, answer, _ = s.post("/v1/verify", {"items": [QUICK]})
        assert (status, answer["verdicts"][0]["status"]) == (200, "correct")
        assert wait_for(lambda: not sandbox_processes(), timeout=10)  # the dead worker's sandbox: reaped
        assert s.metric('rlvr_serve_worker_deaths_total{scorer="verifier:python_tests"}') == 1.0
        assert wait_for(lambda: s.metric("rlvr_serve_orphans_killed_total") >= 1.0, timeout=10)


def test_sigterm_finishes_the_request_in_flight_and_exits_0():
    s = Service("--verifier", "python_tests", "--workers", "1")
    try:
        thread, box = in_background(lambda: s.post("/v1/verify", {"items": [sleepy(2)]}))
        assert wait_for(lambda: s.get("/healthz")[1]["queue_items"] == 1)
        assert s.stop(signal.SIGTERM, timeout=60) == 0
        thread.join(timeout=30)
        status, answer, _ = box["result"]
        assert (status, answer["verdicts"][0]["status"]) == (200, "correct")
        assert s.lines[-1] == "rlvr serve: stopped (0 items left unanswered)"
    finally:
        s.close()


def test_the_hostile_suite_through_the_service_scores_zero_and_leaves_nothing():
    scratch = tempfile.TemporaryDirectory(prefix="rlvr-serve-attack-")
    attacks, listener = hostile_suite(scratch.name)
    items = [
        {
            "id": a.name,
            "completion": a.completion,
            "tests": a.problem.tests,
            "entry_point": a.problem.meta["entry_point"],
        }
        for a in attacks
    ]
    try:
        with Service("--verifier", "python_tests", "--workers", "2") as s:
            status, answer, _ = s.post("/v1/verify", {"items": items}, timeout=600)
            assert status == 200
            assert [v["id"] for v in answer["verdicts"]] == [a.name for a in attacks]
            assert {v["id"]: v["reward"] for v in answer["verdicts"]} == {a.name: 0.0 for a in attacks}
            # a worker killed at its deadline takes its sandboxed runs with it; the reaper gets any stragglers
            assert wait_for(lambda: not sandbox_processes(), timeout=10)
            assert {a.name: host_damage(a, listener) for a in attacks} == {a.name: [] for a in attacks}
            assert s.get("/healthz")[0] == 200  # the service survived every attack
        assert sandbox_processes() == []
    finally:
        listener.close()
        scratch.cleanup()


def test_a_service_killed_outright_leaves_no_pool_worker():
    """SIGKILL gives the service no chance to close its pools: its workers die with it (PR_SET_PDEATHSIG)."""
    s = Service("--task", "arithmetic", "--verifier", "python_tests", "--workers", "2")
    try:
        assert s.post("/v1/verify", {"items": [QUICK], "verifier": "python_tests"})[0] == 200
        assert wait_for(lambda: len(s.children()) == 4, timeout=60)  # two kept pools of two (math's warms up first)
        workers = s.children()
        s.proc.kill()
        s.proc.wait(timeout=30)
        assert wait_for(lambda: not any(os.path.exists(f"/proc/{p}") and _alive(p) for p in workers), timeout=20)
    finally:
        s.close()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
