"""Candidate side: load the untrusted code, then answer the judge's calls over two pipes.

Everything in this process is untrusted once the candidate's code ran: it may rewrite this loop, and
that is fine, because the judge only ever accepts plain data from it (see wire.py) and keeps the
tests, the comparisons and the verdict in its own process under another uid.
"""

import os
import sys

import wire


def main():
    requests = os.fdopen(int(sys.argv[1]), "rb")
    replies = os.fdopen(int(sys.argv[2]), "wb")
    sys.stdin = open(os.devnull)
    ns = {"__name__": "__candidate__", "__builtins__": __builtins__}
    try:
        with open("solution.py") as f:
            source = f.read()
        exec(compile(source, "solution.py", "exec"), ns)
    except BaseException as e:  # noqa: BLE001 - any failure to load is reported, SystemExit included
        wire.send(replies, {"load_error": f"{type(e).__name__}: {e}"[:500]})
        return
    wire.send(replies, {"ready": True})
    while (msg := wire.receive(requests)) is not None:
        wire.send(replies, answer(ns, msg))


def answer(ns, msg):
    fn = ns.get(msg.get("call"))
    if not callable(fn):
        return {"missing": str(msg.get("call"))}
    try:
        value = fn(*wire.decode(msg["args"]), **wire.decode(msg["kwargs"]))
        return {"ok": wire.encode(value)}
    except BaseException as e:  # noqa: BLE001 - the judge decides what a raise means
        return {"raise": type(e).__name__, "msg": str(e)[:300]}


if __name__ == "__main__":
    main()
