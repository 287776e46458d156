"""`rlvr serve --task NAME | --verifier KIND [--host 127.0.0.1] [--port N] [--workers N] [--token-file FILE]`: the
verifiers behind HTTP (rlvr.serve; docs/serving.md). Needs the extra `pip install "rlvr[serve]"`.
"""

from __future__ import annotations

import argparse


def add_parser(subparsers) -> argparse.ArgumentParser:
    from rlvr.serve.server import ServeOptions

    d = ServeOptions()
    p = subparsers.add_parser("serve", help="score completions over HTTP (POST /v1/verify, OpenRLHF's /get_reward)")
    p.add_argument(
        "--task",
        action="append",
        default=[],
        metavar="NAME",
        help="serve this task's grader, as training grades it (repeatable; the first given is the default)",
    )
    p.add_argument(
        "--verifier",
        action="append",
        default=[],
        metavar="KIND",
        help="serve one verifier kind (repeatable; default math when no --task)",
    )
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a setting for the --verifier kinds")
    p.add_argument("--host", default=d.host, help="address to bind (default 127.0.0.1; another needs --token-file)")
    p.add_argument("--port", type=int, default=d.port, help="port (0 = any free one, printed at start)")
    p.add_argument("--workers", type=int, default=d.workers, help="pool worker processes per batch (0 = in-thread)")
    p.add_argument("--timeout-s", type=float, default=d.timeout_s, help="per-item deadline in seconds")
    p.add_argument("--token-file", help="a file holding the bearer token clients must send")
    p.add_argument(
        "--insecure",
        action="store_true",
        help="allow a non-loopback address without a token, and code without the sandbox's own uid",
    )
    p.add_argument("--max-body-bytes", type=int, default=d.max_body_bytes, help="larger bodies get 413")
    p.add_argument("--max-items", type=int, default=d.max_items, help="items per request; more get 413")
    p.add_argument(
        "--max-queue-items",
        type=int,
        default=d.max_queue_items,
        help="items waiting or being scored; past it requests get 429 with Retry-After",
    )
    p.add_argument("--max-batch-items", type=int, default=d.max_batch_items, help="items scored in one batch at most")
    p.add_argument("--grace-s", type=float, default=d.grace_s, help="on SIGTERM, time for requests in flight")
    return p


def run(args) -> int:
    from rlvr.serve.server import ServeOptions, serve
    from rlvr.verifiers.commands import parse_settings

    return serve(
        ServeOptions(
            tasks=args.task,
            verifiers=args.verifier,
            settings=parse_settings(args.set),
            host=args.host,
            port=args.port,
            workers=args.workers,
            timeout_s=args.timeout_s,
            token_file=args.token_file,
            insecure=args.insecure,
            max_body_bytes=args.max_body_bytes,
            max_items=args.max_items,
            max_queue_items=args.max_queue_items,
            max_batch_items=args.max_batch_items,
            grace_s=args.grace_s,
        )
    )
