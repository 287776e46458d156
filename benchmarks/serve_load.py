"""Load, soak and fault runs of `rlvr serve` on loopback; every answer checked against local scoring.

    python benchmarks/serve_load.py --clients 1,2,4,8 --seconds 20           # load: a phase per concurrency
    python benchmarks/serve_load.py --clients 4 --seconds 180 --soak         # soak: RSS, fds, processes over time
    python benchmarks/serve_load.py --clients 4 --seconds 60 --kill-every 5  # faults: SIGKILL pool workers

The script starts its own service (`rlvr serve --task arithmetic --verifier python_tests` on 127.0.0.1, a free
port, a small queue so that 429s can begin), then N client threads, each sending requests for T seconds (and at
most --max-requests each): a mix of math (plain: right and wrong answers; pathological: refused or timed out),
code (passing, failing, hostile) and malformed bodies. Every item id is unique; each answer is checked: the
verdict for every id sent, once (0 lost, 0 duplicated), with the status and reward local scoring gave the same
item (0 mismatched); a malformed body must get its 4xx. A 429 waits its Retry-After and is sent again (counted).
With --kill-every, a pool worker killed mid-item makes that item `error` (counted apart, not a mismatch).

Printed: items/s, latency p50 / p95 / p99 per request kind, 429s per phase (the concurrency at which they begin),
and the in-process pool's items/s on the same items (the service's overhead as a ratio). It never asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import sys
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from serve_util import Service, children_of, kill  # noqa: E402  (the tests' loopback service helper)

SQ = {"tests": ["assert sq(3) == 9", "assert sq(-4) == 16"], "entry_point": "sq"}
HOSTILE = (
    "os_exit",
    "kill_parent",
    "fake_success_line",
    "redefine_assertion_builtins",
    "always_equal_object",
    "infinite_loop",
)
WEIGHTS = {
    "math_plain": 50,
    "math_pathological": 5,
    "code_passing": 12,
    "code_failing": 12,
    "code_hostile": 3,
    "malformed": 8,
}
MALFORMED = [
    (b"{not json", 422),
    (b'{"items": 3}', 422),
    (b'{"items": [{"completion": 1, "answer": "2"}]}', 422),
    (b'{"items": [], "task": "nope"}', 400),
    (b'{"items": [{"completion": "x"}]}', 422),
]


def item_pool() -> dict[str, list[dict]]:
    """Items by kind (without ids): what the clients draw from."""
    from rlvr.tasks import load_task
    from rlvr.verifiers.code_attacks import ATTACKS

    problems = load_task("arithmetic").problems("train")[:40]
    plain = [{"completion": f"so \\boxed{{{p.answer}}}", "answer": p.answer} for p in problems[:20]]
    plain += [{"completion": f"\\boxed{{{p.answer}7}}", "answer": p.answer} for p in problems[20:]]
    # refused before sympy sees them (power tower, factorial of a factorial, too long): deterministic verdicts. An
    # item whose parse takes about the deadline (300 nested parentheses: ~5 s here) is not used: its verdict is
    # `timeout` or `no_answer` by the machine's load, so it cannot be checked against a local pass.
    patho = [
        {"completion": c, "answer": "2"}
        for c in ("\\boxed{10^{10^{10^{10}}}}", "\\boxed{9!!!!!!!!}", "\\boxed{" + "1+" * 3000 + "1}")
    ]
    code = "```python\n{}```"
    return {
        "math_plain": plain,
        "math_pathological": patho,
        "code_passing": [{"completion": code.format("def sq(x):\n    return x * x\n"), **SQ}],
        "code_failing": [{"completion": code.format("def sq(x):\n    return x + x\n"), **SQ}],
        "code_hostile": [
            {"completion": code.format(ATTACKS[name].replace("{{", "{").replace("}}", "}")), **SQ} for name in HOSTILE
        ],
    }


def scorer_of(kind: str) -> str:
    return "verifier:python_tests" if kind.startswith("code") else "task:arithmetic"


def local_expectations(pool: dict, workers: int) -> tuple[dict, float]:
    """(key -> (status, reward)) for every distinct item, scored in process by the same scorers; and the in-process
    pool's items/s on the load's mix (the baseline for the service's overhead)."""
    from rlvr.serve.scoring import build_scorers, score_jobs
    from rlvr.tasks.rows import problem_from_row

    scorers = build_scorers([("task", "arithmetic"), ("verifier", "python_tests")], workers=workers, timeout_s=5.0)
    expected = {}
    for kind, items in pool.items():
        s = scorers[scorer_of(kind)]
        answers = score_jobs(
            s.reward, [i["completion"] for i in items], [problem_from_row(i, n, s.task) for n, i in enumerate(items)]
        )
        expected.update({key(i): (a["status"], a["reward"]) for i, a in zip(items, answers)})
    rng, kinds = random.Random(0), [k for k in WEIGHTS if k != "malformed"]
    mix = defaultdict(list)  # a weighted sample of the load's items, grouped by scorer as the service batches them
    for _ in range(200):
        kind = rng.choices(kinds, [WEIGHTS[k] for k in kinds])[0]
        mix[scorer_of(kind)].append(rng.choice(pool[kind]))
    start = time.monotonic()
    for name, items in mix.items():
        s = scorers[name]
        score_jobs(s.reward, [i["completion"] for i in items], [problem_from_row(i, 0, s.task) for i in items])
    return expected, 200 / (time.monotonic() - start)


def key(item: dict) -> str:
    return json.dumps([item["completion"], item.get("answer"), item.get("tests")])


class Tally:
    """What the clients saw, under one lock."""

    def __init__(self):
        self.lock = threading.Lock()
        self.latency = defaultdict(list)
        self.counts = Counter()
        self.mismatches: list[str] = []

    def add(self, **kw) -> None:
        with self.lock:
            self.counts.update(kw)


def client(svc, pool, expected, tally, stop_at, max_requests, seed, faults_ok) -> None:
    rng = random.Random(seed)
    kinds, weights = list(WEIGHTS), list(WEIGHTS.values())
    for seq in range(max_requests):
        if time.monotonic() >= stop_at:
            return
        kind = rng.choices(kinds, weights)[0]
        if kind == "malformed":
            body, want = rng.choice(MALFORMED)
            t0 = time.monotonic()
            status = post_until_admitted(svc, body, tally)[0]
            tally.latency[kind].append(time.monotonic() - t0)
            tally.add(requests=1, malformed_ok=int(status == want), malformed_bad=int(status != want))
            continue
        items = [dict(rng.choice(pool[kind]), id=f"{seed}-{seq}-{k}") for k in range(rng.randint(1, 4))]
        t0 = time.monotonic()
        status, answer = post_until_admitted(
            svc,
            {"items": items, "verifier" if kind.startswith("code") else "task": scorer_of(kind).split(":", 1)[1]},
            tally,
        )
        tally.latency[kind].append(time.monotonic() - t0)
        check(items, status, answer, expected, tally, faults_ok)


def post_until_admitted(svc, body, tally, tries: int = 30):
    for _ in range(tries):
        status, answer, headers = svc.post("/v1/verify", body, timeout=300)
        if status != 429:
            return status, answer
        tally.add(rejected_429=1)
        time.sleep(min(5.0, float(headers.get("retry-after", 1))))
    return 429, None


def check(items, status, answer, expected, tally, faults_ok) -> None:
    if status == 429:  # never admitted: the client's retry budget ran out (not lost by the service)
        tally.add(requests=1, gave_up_429=len(items))
        return
    if status != 200:
        tally.add(requests=1, lost=len(items))
        return
    got = Counter(v["id"] for v in answer["verdicts"])
    lost = sum(1 for i in items if got[i["id"]] == 0)
    duplicated = sum(n - 1 for n in got.values() if n > 1)
    mismatched = faults = 0
    for item, v in zip(items, answer["verdicts"]):
        want = expected[key(item)]
        if (v["status"], v["reward"]) == want:
            continue
        if faults_ok and v["status"] == "error" and v["detail"].startswith("worker died"):
            faults += 1
        else:
            mismatched += 1
            with tally.lock:
                tally.mismatches.append(
                    f"{item['id']}: got {(v['status'], v['reward'])} ({v['detail'][:70]}), local {want}"
                )
    tally.add(
        requests=1, items=len(items), lost=lost, duplicated=duplicated, mismatched=mismatched, fault_errors=faults
    )


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[q - 1] if len(values) >= 2 else (values[0] if values else float("nan"))


def phase(svc, pool, expected, clients: int, seconds: float, max_requests: int, faults_ok: bool) -> Tally:
    tally, stop_at = Tally(), time.monotonic() + seconds
    threads = [
        threading.Thread(
            target=client,
            args=(svc, pool, expected, tally, stop_at, max_requests, 1000 * clients + c, faults_ok),
            daemon=True,
        )
        for c in range(clients)
    ]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=seconds + 600)
    tally.wall = time.monotonic() - start
    return tally


def report(clients: int, tally: Tally) -> None:
    c = tally.counts
    print(
        f"\n== {clients} client(s): {c['requests']} requests, {c['items']} items in {tally.wall:.1f}s = "
        f"{c['items'] / tally.wall:.1f} items/s; lost {c['lost']}, duplicated {c['duplicated']}, mismatched "
        f"{c['mismatched']}; malformed answered right {c['malformed_ok']} / wrong {c['malformed_bad']}; "
        f"429s {c['rejected_429']} (items given up after 30: {c['gave_up_429']}); worker-kill errors "
        f"{c['fault_errors']}"
    )
    for kind in WEIGHTS:
        lat = tally.latency.get(kind, [])
        if lat:
            print(
                f"   {kind:<18} n={len(lat):>4}  p50 {pct(lat, 50) * 1e3:8.1f} ms  p95 {pct(lat, 95) * 1e3:8.1f} ms"
                f"  p99 {pct(lat, 99) * 1e3:8.1f} ms"
            )
    for m in tally.mismatches[:5]:
        print(f"   MISMATCH {m}")


def process_stats(pid: int) -> dict:
    with open(f"/proc/{pid}/status") as f:
        rss = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    return {"rss_mb": rss / 1024, "fds": len(os.listdir(f"/proc/{pid}/fd")), "children": len(children_of(pid))}


def killer(svc, every: float, stop_at: float, killed: list) -> None:
    while time.monotonic() + every < stop_at:
        time.sleep(every)
        workers = children_of(svc.proc.pid)
        kill(workers)
        killed.append(len(workers))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", default="1,2,4", help="concurrency per phase, comma-separated")
    ap.add_argument("--seconds", type=float, default=15.0, help="length of each phase (bounded)")
    ap.add_argument("--max-requests", type=int, default=2000, help="per client per phase, at most")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--max-queue-items", type=int, default=24)
    ap.add_argument("--soak", action="store_true", help="sample RSS, fds and children every 10 s")
    ap.add_argument("--kill-every", type=float, default=0.0, help="SIGKILL the pool workers every S seconds")
    args = ap.parse_args()
    pool = item_pool()
    expected, local_rate = local_expectations(pool, args.workers)
    print(f"in-process pool ({args.workers} workers), same items: {local_rate:.1f} items/s")
    svc = Service(
        "--task",
        "arithmetic",
        "--verifier",
        "python_tests",
        "--workers",
        str(args.workers),
        "--max-queue-items",
        str(args.max_queue_items),
        "--max-items",
        "8",
    )
    try:
        run_phases(svc, pool, expected, args, local_rate)
        code = svc.stop(signal.SIGTERM, timeout=120)
        from rlvr.verifiers.sandbox import sandbox_processes

        print(f"service stopped: exit {code}; sandboxed processes left: {len(sandbox_processes())}")
    finally:
        svc.close()
    return 0


def run_phases(svc, pool, expected, args, local_rate: float) -> None:
    first_429 = None
    for clients in [int(c) for c in args.clients.split(",")]:
        killed: list = []
        stop_at = time.monotonic() + args.seconds
        extra = []
        if args.kill_every:
            extra.append(threading.Thread(target=killer, args=(svc, args.kill_every, stop_at, killed), daemon=True))
        if args.soak:
            extra.append(threading.Thread(target=sampler, args=(svc, stop_at), daemon=True))
        for t in extra:
            t.start()
        tally = phase(svc, pool, expected, clients, args.seconds, args.max_requests, bool(args.kill_every))
        report(clients, tally)
        for t in extra:
            t.join(timeout=30)
        if args.kill_every:
            print(f"   pool workers SIGKILLed: {sum(killed)} in {len(killed)} rounds")
        if first_429 is None and tally.counts["rejected_429"]:
            first_429 = clients
        print(f"   service / in-process items/s: {tally.counts['items'] / tally.wall / local_rate:.2f}")
    print(f"\n429s begin at {first_429} client(s)" if first_429 else "\nno 429 at any concurrency tried")


def sampler(svc, stop_at: float) -> None:
    """Every 10 s: the service's RSS, open fds and children; growth against the sample at 10 s (warmed up)."""
    start, first = time.monotonic(), None
    while time.monotonic() + 10 < stop_at:
        time.sleep(10)
        now = process_stats(svc.proc.pid)
        first = first or now
        print(
            f"   soak t={time.monotonic() - start:.0f}s: {now}; RSS growth "
            f"{(now['rss_mb'] / first['rss_mb'] - 1) * 100:+.1f}%",
            flush=True,
        )


if __name__ == "__main__":
    sys.exit(main())
