"""Judge side: run the hidden tests against a proxy of the candidate and report each result.

The tests arrive on stdin (never as a file, never in argv) and live only in this process, which runs
under a uid of its own: the candidate can neither read them nor touch this process. The candidate is
reachable only through `Proxy`, whose calls return values decoded by wire.py into fresh builtins.
Results go to a private copy of fd 1 taken before any test code runs; the tests' own prints go to
stderr. Report lines: {"test": i, "passed": bool, "detail": str} per test, then {"done": n}.
"""

import ast
import builtins
import json
import os
import sys

import wire

gone = False  # once the candidate failed to answer, no later test can pass


class CandidateGone(BaseException):
    """The candidate died, closed its channel, sent garbage or lacks the function: not catchable as Exception."""


class CandidateError(Exception):
    """The candidate raised an exception that is not a builtin exception type."""


class Proxy:
    def __init__(self, name, requests, replies):
        self.name, self.requests, self.replies = name, requests, replies

    def __call__(self, *args, **kwargs):
        global gone
        if gone:
            raise CandidateGone("candidate no longer answering")
        try:
            wire.send(self.requests, {"call": self.name, "args": wire.encode(args), "kwargs": wire.encode(kwargs)})
            msg = wire.receive(self.replies)
            if msg is not None and "ok" in msg:
                return wire.decode(msg["ok"])
        except (OSError, ValueError, TypeError, RecursionError) as e:
            gone = True
            raise CandidateGone(f"channel: {type(e).__name__}: {e}") from None
        if msg is not None and "raise" in msg:
            exc = getattr(builtins, str(msg["raise"]), None)
            exc = exc if isinstance(exc, type) and issubclass(exc, Exception) else CandidateError
            raise exc(str(msg.get("msg", ""))[:300])
        gone = True
        raise CandidateGone("candidate ended" if msg is None else f"bad reply {str(msg)[:100]}")


def called_names(source):
    """Names called directly in `source` (`f(...)`), which the candidate must provide."""
    return {n.func.id for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}


def tests_of(spec, make_proxy):
    """[(label, thunk)]: the callables that each run one hidden test."""
    ns = {"__name__": "__judge__"}
    exec(compile(spec.get("setup") or "", "setup", "exec"), ns)
    if spec.get("check") is not None:
        exec(compile(spec["check"], "check", "exec"), ns)
        proxy = make_proxy(spec["entry_point"])
        ns[spec["entry_point"]] = proxy
        return [("check", lambda: ns["check"](proxy))]
    thunks = []
    if spec.get("entry_point"):  # always the candidate's, even where the setup defines a stub of it
        ns[spec["entry_point"]] = make_proxy(spec["entry_point"])
    for i, src in enumerate(spec["asserts"]):
        code = compile(src, f"assert[{i}]", "exec")
        for name in called_names(src):
            if name not in ns and not hasattr(builtins, name):
                ns[name] = make_proxy(name)
        thunks.append((src[:80], lambda code=code: exec(code, ns)))
    return thunks


def main():
    report = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    requests = os.fdopen(int(sys.argv[2]), "wb")
    replies = os.fdopen(int(sys.argv[1]), "rb")
    spec = json.loads(sys.stdin.read())

    def emit(msg):
        report.write(json.dumps(msg) + "\n")
        report.flush()

    try:
        thunks = tests_of(spec, lambda name: Proxy(name, requests, replies))
    except Exception as e:  # the gold itself is broken: no candidate code has been involved
        emit({"gold_error": f"{type(e).__name__}: {e}"[:300]})
        return
    first = wire.receive(replies) if thunks else None
    ready = first is not None and first.get("ready") is True
    global gone
    gone = not ready
    load = "" if ready else str((first or {}).get("load_error", "candidate did not start"))[:300]
    for i, (label, thunk) in enumerate(thunks):
        passed, detail = False, load
        if not gone:
            try:
                thunk()
                passed = not gone
            except BaseException as e:  # noqa: BLE001 - any failure of a test is that test failing
                detail = f"{label}: {type(e).__name__}: {e}"[:300]
        emit({"test": i, "passed": passed, "detail": detail})
    emit({"done": len(thunks)})


if __name__ == "__main__":
    main()
