"""`rlvr serve --task NAME | --config FILE | --run DIR | --verifier KIND [--set ...] [--host 127.0.0.1] [--port N]
[--workers N] [--token-file FILE]`: the verifiers behind HTTP (rlvr.serve; docs/serving.md). Needs the extra
`pip install "rlvr[serve]"`.
"""

from __future__ import annotations

import argparse


def add_parser(subparsers) -> argparse.ArgumentParser:
    from rlvr.serve.server import ServeOptions

    d = ServeOptions()
    p = subparsers.add_parser("serve", help="score completions over HTTP (POST /v1/verify, OpenRLHF's /get_reward)")
    for flag, metavar, what in (
        ("--task", "NAME", "a task's grader, as training grades it (settings: --set task.settings.KEY=VALUE)"),
        ("--config", "FILE", "the reward a config (YAML file or preset) trains with: its task settings and reward"),
        ("--run", "DIR", "the reward a run directory trained with (its resolved config.yaml)"),
        ("--verifier", "KIND", "one verifier kind (settings: --set KEY=VALUE)"),
    ):
        p.add_argument(
            flag,
            dest="sources",
            action="append",
            type=_source(flag[2:]),
            metavar=metavar,
            help=f"serve {what}; repeatable, in any mix: the first given is what items naming none get "
            f"(none given: --verifier math)",
        )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a setting of the --verifier kinds, or task.settings.KEY=VALUE for every --task (e.g. "
        "task.settings.path=data.jsonl)",
    )
    p.add_argument("--host", default=d.host, help="address to bind (default 127.0.0.1; another needs --token-file)")
    p.add_argument("--port", type=int, default=d.port, help="port (0 = any free one, printed at start)")
    p.add_argument(
        "--workers", type=int, help="pool worker processes per batch (0 = in-thread; default: a config's, else 2)"
    )
    p.add_argument("--timeout-s", type=float, help="per-item deadline in seconds (default: a config's, else 5)")
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


def _source(flag: str):
    """argparse `type` for a scorer flag: the value tagged with its flag, so that --task, --config, --run and
    --verifier append to one list in the order given."""

    def tag(value: str) -> tuple[str, str]:
        return flag, value

    return tag


def split_settings(pairs: list[str]) -> tuple[dict, dict]:
    """(verifier settings, task settings) of the --set pairs: task.settings.KEY=VALUE go to the tasks (read as
    `rlvr verify --task` reads them), the others to the verifier kinds."""
    from rlvr.config import parse_set
    from rlvr.verifiers.commands import parse_settings

    task = [pair for pair in pairs if pair.strip().startswith("task.settings.")]
    task_settings = {}
    for pair in task:
        task_settings.update(parse_set(pair)["task"]["settings"])
    return parse_settings([pair for pair in pairs if pair not in task]), task_settings


def run(args) -> int:
    from rlvr.serve.server import ServeOptions, serve

    settings, task_settings = split_settings(args.set)
    return serve(
        ServeOptions(
            sources=args.sources or [],
            settings=settings,
            task_settings=task_settings,
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
