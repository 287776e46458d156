"""Engines tier, two nodes: two `torchrun --nnodes 2` launchers on this machine, meeting through a c10d rendezvous
on 127.0.0.1, each node one process (the tiny random model, rollouts from the stand-in server). One update on the
two nodes equals the one-process update on the same completions; a training run whose node is killed (SIGKILL to
the launcher and its worker, as a machine lost) and then resumed on both nodes logs what the uninterrupted run
logs."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

from conftest import save_tiny_model
from rlvr.rundir.checkpoint import latest_complete
from rlvr.verifiers.sandbox import descendants
from test_distributed import CASES, free_port, run_case, train_config

pytestmark = pytest.mark.engines

TESTS = os.path.dirname(os.path.abspath(__file__))
STEPS = 6
UPDATE_SCRIPT = """
import sys
sys.path.insert(0, {tests!r})
import torch
from rlvr.training import distributed
from test_distributed import CASES, run_case
torch.set_num_threads(1)
comm = distributed.setup()
torch.save({{c[0]: run_case(c, comm) for c in CASES}}, f"{{sys.argv[1]}}/rank{{comm.rank}}.pt")
comm.close()
"""


def launch(port: int, args: list, log: Path) -> list[subprocess.Popen]:
    """The two nodes: one torchrun launcher each (its own session, so its process tree is one node)."""
    env = dict(os.environ, OMP_NUM_THREADS="1")  # one core per node
    nodes = []
    for rank in (0, 1):
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--node_rank", str(rank)]
        cmd += ["--nproc-per-node", "1", "--rdzv_backend", "c10d", "--rdzv_endpoint", f"127.0.0.1:{port}", *args]
        out = open(f"{log}.node{rank}", "w")
        nodes.append(subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True))
    return nodes


def wait_all(nodes, timeout: float, log: Path) -> list[int]:
    deadline = time.monotonic() + timeout
    try:
        return [n.wait(timeout=max(1.0, deadline - time.monotonic())) for n in nodes]
    except subprocess.TimeoutExpired:
        for n in nodes:
            kill_node(n)
        tails = [Path(f"{log}.node{r}").read_text()[-2000:] for r in (0, 1)]
        raise AssertionError(f"the nodes ran past {timeout:g}s:\n" + "\n---\n".join(tails)) from None


def node_processes(node: subprocess.Popen) -> list[int]:
    return [node.pid] + [pid for pid, _ in descendants(node.pid)]


def kill_node(node: subprocess.Popen) -> None:
    """SIGKILL the launcher and everything it started, at once: the node is gone, not stopped."""
    for pid in node_processes(node):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    node.wait()


def rank_of(node: subprocess.Popen) -> int | None:
    """The RANK torchrun gave this node's worker (c10d assigns ranks by arrival, not by --node_rank)."""
    for pid in node_processes(node)[1:]:
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = dict(x.split(b"=", 1) for x in f.read().split(b"\0") if b"=" in x)
        except OSError:
            continue
        if b"RANK" in env:
            return int(env[b"RANK"])
    return None


def lines(run: Path) -> list[str]:
    """The complete lines of metrics.jsonl (none while it does not exist)."""
    try:
        text = (run / "metrics.jsonl").read_text()
    except FileNotFoundError:
        return []
    return text.splitlines()[: text.count("\n")]


def metrics(run: Path) -> list[dict]:
    rows = [json.loads(x) for x in lines(run)]
    return [{k: v for k, v in r.items() if not k.startswith(("time/", "throughput/"))} for r in rows]


@pytest.fixture(scope="module")
def folder(tmp_path_factory, tokenizer, server):
    """The task data, the tiny model on disk and a run config (rollouts from the stand-in server on 127.0.0.1)."""
    out = tmp_path_factory.mktemp("nodes")
    (out / "data.jsonl").write_text(
        "".join(
            json.dumps({"id": f"q{i}", "prompt": f"Say something about {i}.", "answer": "[a-d]"}) + "\n"
            for i in range(40)
        )
    )
    save_tiny_model(tokenizer, out / "model")
    cfg = train_config(out / "unset", out / "data.jsonl", server.url)
    cfg["model"]["name"] = str(out / "model")
    cfg["train"]["steps"] = STEPS
    cfg["log"]["checkpoint_every"] = 2  # so that a kill can lose logged steps past the last checkpoint
    (out / "config.yaml").write_text(yaml.safe_dump(cfg))
    return out


@pytest.fixture(scope="module")
def full_run(folder):
    """`rlvr train` on the two nodes, uninterrupted."""
    args = ["-m", "rlvr", "train", str(folder / "config.yaml"), "--output-dir", str(folder / "full")]
    assert wait_all(launch(free_port(), args, folder / "full"), 300, folder / "full") == [0, 0]
    return folder / "full"


def test_two_nodes_take_the_one_process_step(folder):
    (folder / "update.py").write_text(UPDATE_SCRIPT.format(tests=TESTS))
    nodes = launch(free_port(), [str(folder / "update.py"), str(folder)], folder / "update")
    assert wait_all(nodes, 300, folder / "update") == [0, 0]
    torch.set_num_threads(1)
    for rank in (0, 1):
        results = torch.load(folder / f"rank{rank}.pt")
        for case in CASES:
            ref_stats, ref_weights = run_case(case)
            stats, weights = results[case[0]]
            assert stats["loss"] == pytest.approx(ref_stats["loss"], abs=1e-6), case[0]
            assert stats["grad_norm"] == pytest.approx(ref_stats["grad_norm"], rel=1e-5), case[0]
            for name, w in ref_weights.items():
                torch.testing.assert_close(weights[name], w, atol=1e-6, rtol=1e-5, msg=f"{case[0]}: {name}")


def test_two_node_run_logs_the_one_process_metrics(folder, full_run):
    """The same run in this one process: the rollouts are fixed by the prompts, so it sees the same completions."""
    from rlvr.training.loop import train

    cfg = yaml.safe_load((folder / "config.yaml").read_text())
    cfg["output_dir"] = str(folder / "one")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        train(cfg, quiet=True)
    finally:
        torch.set_num_threads(threads)
    one, two = metrics(folder / "one"), metrics(full_run)
    assert [r["step"] for r in two] == list(range(STEPS))
    assert any(r["dynamic_sampling/generated_groups"] > 4 for r in one)  # a refill round happened
    for a, b in zip(one, two):
        assert a.keys() == b.keys()
        for key in a:
            assert b[key] == pytest.approx(a[key], rel=1e-5, abs=1e-6), (a["step"], key)
    assert (folder / "one" / "samples.jsonl").read_text() == (full_run / "samples.jsonl").read_text()


def test_a_node_killed_then_both_resumed_continue_exactly(folder, full_run):
    """The node of rank 0 (which writes the run directory) is killed once step 2 is logged, past checkpoint step-2;
    the other node must end by itself (its next collective fails), and `rlvr train --resume` on both nodes must
    redo the lost steps exactly: metrics (less timings) and samples equal to the uninterrupted two-node run's."""
    train = ["-m", "rlvr", "train", str(folder / "config.yaml"), "--output-dir"]
    killed = launch(free_port(), [*train, str(folder / "killed")], folder / "killed")
    checkpoints, deadline = folder / "killed" / "checkpoints", time.monotonic() + 300
    while not (checkpoints / "step-2").is_dir() or len(lines(folder / "killed")) < 3:  # step 2 logged, not saved
        assert time.monotonic() < deadline and all(n.poll() is None for n in killed), "the run ended first"
        time.sleep(0.02)
    victim = next(n for n in killed if rank_of(n) == 0)
    kill_node(victim)
    t = time.monotonic()
    survivor = [n for n in killed if n is not victim]
    assert wait_all(survivor, 120, folder / "killed") == [1]  # not left hanging in a collective
    logged, saved = len(lines(folder / "killed")), latest_complete(checkpoints).name
    print(f"\nkilled at {logged} metrics lines and {saved}; the other node exited in {time.monotonic() - t:.1f}s")
    assert 3 <= logged < STEPS and saved in ("step-2", "step-4") and int(saved[5:]) < logged

    resumed = launch(free_port(), ["-m", "rlvr", "train", "--resume", str(folder / "killed")], folder / "resumed")
    assert wait_all(resumed, 300, folder / "resumed") == [0, 0]
    a, b = metrics(full_run), metrics(folder / "killed")
    assert [r["step"] for r in b] == list(range(STEPS))
    assert a == b
    assert (full_run / "samples.jsonl").read_text() == (folder / "killed" / "samples.jsonl").read_text()
