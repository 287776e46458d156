"""Engines tier, Ray: `reward.engine: ray` on a real local Ray instance (ray==2.60.0, installed by `make
test-engines`), started here on 127.0.0.1 only: verdicts equal the local pool's, the code verifier's hostile
suite scores 0 and leaves the host as it was, timed-out tasks are force-cancelled (their workers and sandboxed
runs gone), and nothing of Ray is left running after `ray.shutdown()`."""

import os
import sys
import time

import pytest

# Both are read when Ray is imported, so they are set before any test imports it. No auth token: nothing is
# written under ~/.ray, and the instance is reachable from this machine only (checked below). Without the second,
# Ray 2.60 replaces a node IP of 127.0.0.1 by the machine's address (services.resolve_ip_for_localhost) and its
# gRPC servers (GCS, raylet, workers) listen on every interface, as measured here.
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

from rlvr.config import RewardConfig  # noqa: E402
from rlvr.tasks.base import Problem  # noqa: E402
from rlvr.verifiers import ray_pool  # noqa: E402
from rlvr.verifiers.code_attacks import ATTACKS, SOLVED_SQ, TARGET, host_damage, hostile_suite  # noqa: E402
from rlvr.verifiers.compose import build_reward  # noqa: E402
from rlvr.verifiers.math import MathVerifier  # noqa: E402
from rlvr.verifiers.pool import score_batch  # noqa: E402
from rlvr.verifiers.sandbox import descendants, sandbox_processes  # noqa: E402

pytestmark = pytest.mark.engines

MATH_CASES = [r"\boxed{4}", r"\boxed{5}", "4", r"\boxed{2^{2^{2^{2^2}}}}", r"\boxed{3} or \boxed{4}"]
RAY_PROCESS = ("gcs_server", "raylet", "ray::", "ray/dashboard", "ray/autoscaler", "ray/_private")


def ray_processes() -> list[tuple[int, str]]:
    """(pid, command line) of this process's descendants that belong to Ray (a local instance is started as
    children of its driver)."""
    found = []
    for pid, _ in descendants(os.getpid()):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if any(mark in cmd for mark in RAY_PROCESS):
            found.append((pid, cmd[:120]))
    return found


def listening(pids) -> set[str]:
    """The local addresses of the TCP sockets in LISTEN state that the processes `pids` hold."""
    by_inode = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for row in f.read().splitlines()[1:]:
                cols = row.split()
                if cols[3] == "0A":  # TCP_LISTEN
                    by_inode[cols[9]] = cols[1]
    found = set()
    for pid in pids:
        try:
            links = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
        except OSError:
            continue
        found |= {by_inode[x[8:-1]] for x in links if x.startswith("socket:[") and x[8:-1] in by_inode}
    return found


def is_loopback(hex_addr: str) -> bool:
    """/proc/net/tcp's hex address: 127.x.x.x (little-endian, so its first byte last), ::1, or ::ffff:127.x.x.x."""
    host = hex_addr.split(":")[0]
    if len(host) == 8:
        return host.endswith("7F")
    return host == "0" * 31 + "1" or (host[:24] == "0" * 16 + "FFFF0000" and host.endswith("7F"))


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture(scope="module")
def ray():
    ray = pytest.importorskip("ray", reason="the engines tier needs Ray: make test-engines installs ray==2.60.0")
    assert ray_processes() == []
    # workers cannot import this test module; Ray pickles with its own copy of cloudpickle
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False)
    yield ray
    ray.shutdown()


class Misbehaving:
    """Hangs in one C call (time.sleep: no in-process deadline can interrupt it), raises, or kills its worker;
    records the pid of the worker that hangs."""

    name = "misbehaving"

    def __init__(self, pid_file):
        self.pid_file = str(pid_file)

    def score(self, completion, problem):
        from rlvr.verifiers.base import Verdict

        if completion == "hang":
            with open(self.pid_file, "w") as f:
                f.write(str(os.getpid()))
            time.sleep(60)
        if completion == "raise":
            raise RuntimeError("bug in verifier")
        if completion == "exit":
            os._exit(3)
        return Verdict("correct", 1.0, completion, "ok")


def hold(seconds: float):
    yield "holding"  # a streaming task: its first yield says it runs, so holds its CPU
    time.sleep(seconds)


def test_the_instance_listens_on_loopback_only(ray):
    procs = ray_processes()
    assert {"gcs_server", "raylet"} <= {cmd.split()[0].rsplit("/", 1)[-1] for _, cmd in procs}
    addresses = listening([pid for pid, _ in procs])
    assert len(addresses) >= 3  # at least the GCS, the raylet and a worker
    assert [a for a in addresses if not is_loopback(a)] == []


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
    assert [(x.reward, x.extracted, x.detail) for x in remote] == [(x.reward, x.extracted, x.detail) for x in local]


def test_each_failure_costs_only_its_item_and_a_hung_task_is_killed(ray, tmp_path):
    items = ["a", "hang", "b", "exit", "c", "raise", "d"]
    t = time.monotonic()
    out = score_batch(Misbehaving(tmp_path / "pid"), items, [None] * 7, workers=2, timeout_s=0.5, engine="ray")
    assert [v.status for v in out] == ["correct", "timeout", "correct", "error", "correct", "error", "correct"]
    assert out[1].detail == f"worker killed after {0.5 + ray_pool.GRACE_S + ray_pool.REAP_S:g}s"
    assert out[3].detail.startswith("worker died while scoring (")
    assert time.monotonic() - t < 30
    hung = int((tmp_path / "pid").read_text())
    deadline = time.monotonic() + 5
    while alive(hung) and time.monotonic() < deadline:  # ray.cancel(force=True) returns before the worker is gone
        time.sleep(0.05)
    assert not alive(hung)


def test_hostile_suite_through_reward_engine_ray(ray, tmp_path):
    """timeout_s 1.5 under the sandbox's wall of 4 s: the Ray engine's deadline, not the sandbox's, ends the slow
    attacks. A correct solution in the same batch must still be correct (a blanket timeout would hold every attack
    too: before the item's clock started at the task's start, every item here timed out, and a fork bomb's 8
    processes outlived the cluster)."""
    reward = build_reward(
        RewardConfig(
            terms=[{"name": "tests", "kind": "python_tests", "wall_s": 4, "memory_mb": 512}],
            engine="ray",
            workers=2,
            timeout_s=1.5,
        )
    )
    attacks, listener = hostile_suite(str(tmp_path))
    try:
        verdicts = reward.terms[0].verdicts(
            [a.completion for a in attacks] + [SOLVED_SQ], [a.problem for a in attacks] + [TARGET]
        )
        damage = {a.name: host_damage(a, listener) for a in attacks}
    finally:
        listener.close()
    by_name = {a.name: v for a, v in zip(attacks, verdicts)}
    assert len(by_name) == len(ATTACKS) == 20
    assert {
        n: (v.status, v.reward) for n, v in by_name.items() if v.reward != 0 or v.status not in ("wrong", "timeout")
    } == {}
    assert {n: d for n, d in damage.items() if d} == {}
    for slow in ("infinite_loop", "sleep_past_deadline", "fork_bomb"):
        assert by_name[slow].status == "timeout", (slow, by_name[slow])
    assert (verdicts[-1].status, verdicts[-1].reward) == ("correct", 1.0), verdicts[-1]
    assert sandbox_processes() == []


def test_an_item_no_worker_starts_is_an_error(ray, monkeypatch):
    """Both CPUs held by other tasks: the items wait START_LIMIT_S (here 1 s), then are given up as errors."""
    blocker = ray.remote(num_cpus=1)(hold)
    held = [blocker.remote(60) for _ in range(2)]
    try:
        assert [ray.get(next(h)) for h in held] == ["holding"] * 2
        monkeypatch.setattr(ray_pool, "START_LIMIT_S", 1.0)
        t = time.monotonic()
        out = score_batch(MathVerifier(), [r"\boxed{4}"] * 2, [Problem("0", "q", "4")] * 2, workers=2, engine="ray")
        assert [(v.status, v.detail) for v in out] == [
            ("error", "no worker started it within 1s (no free CPU in the Ray cluster?)")
        ] * 2
        assert time.monotonic() - t < 10
    finally:
        for ref in held:
            ray.cancel(ref, force=True)


def test_shutdown_leaves_nothing_running(ray):
    """Last in this file: the instance goes, and with it every Ray process this test session started."""
    assert ray_processes() != []
    ray.shutdown()
    deadline = time.monotonic() + 10
    while ray_processes() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert ray_processes() == []
    assert sandbox_processes() == []
