"""Start-up and shut-down of `rlvr serve`: every check before anything listens, then uvicorn until SIGTERM.

Checks, each a one-line ConfigError (the CLI exits 2 and nothing listens):
- the serve extra is installed (`pip install "rlvr[serve]"`);
- a token file, when given, is readable and not empty;
- an address other than loopback needs a token (anyone who can reach the port could make the service run code),
  unless `insecure` says the operator means it;
- a scorer that runs code needs the sandbox's own uid (the service never runs code as its own user; that takes
  root, docs/sandbox.md), unless `insecure`;
- the tasks, verifier kinds, configs and run directories exist and build (a task missing a setting it needs names
  it); the address can be bound.

SIGTERM (or Ctrl-C): uvicorn stops accepting, the requests in flight finish (up to `grace_s`), the scoring threads
finish their queued batches, the process exits 0.
"""

from __future__ import annotations

import ipaddress
import signal
import socket
import sys
from dataclasses import dataclass, field

from rlvr.config import ConfigError

EXTRA = ("starlette", "uvicorn", "prometheus_client")


@dataclass
class ServeOptions:
    # what to serve, in the order given (the first is what items naming none get): ("task", NAME), ("verifier", KIND),
    # ("config", FILE or preset), ("run", RUN_DIR); none: ("verifier", "math")
    sources: list[tuple[str, str]] = field(default_factory=list)
    settings: dict = field(default_factory=dict)  # verifier settings (--set KEY=VALUE), for --verifier kinds
    task_settings: dict = field(default_factory=dict)  # --set task.settings.KEY=VALUE, for --task names
    host: str = "127.0.0.1"
    port: int = 8000
    # pool worker processes per scoring batch (0 = in the scoring thread) and the per-item deadline; None: a served
    # config's reward.workers / reward.timeout_s, else their defaults (2, 5.0)
    workers: int | None = None
    timeout_s: float | None = None
    token_file: str | None = None
    insecure: bool = False
    max_body_bytes: int = 8 << 20
    max_items: int = 1024  # items in one request
    max_queue_items: int = 4096  # items admitted and not yet answered; more -> 429
    max_batch_items: int = 256  # items one Reward call scores at most
    grace_s: float = 30.0


def check_extra() -> None:
    import importlib

    missing = []
    for name in EXTRA:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    if missing:
        raise ConfigError(f'needs the serve extra (missing: {", ".join(missing)}): pip install "rlvr[serve]"')


def read_token(path: str | None) -> bytes | None:
    if path is None:
        return None
    try:
        with open(path, "rb") as f:
            token = f.read().strip()
    except OSError as e:
        raise ConfigError(f"--token-file {path}: {e.strerror}") from None
    if not token:
        raise ConfigError(f"--token-file {path}: empty; write the bearer token clients will send")
    return token


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_options(opts: ServeOptions, token: bytes | None) -> None:
    if not is_loopback(opts.host) and token is None and not opts.insecure:
        raise ConfigError(
            f"--host {opts.host} is not a loopback address: give --token-file FILE so only clients "
            f"with the token can call, or --insecure to serve it open"
        )
    for name in ("max_body_bytes", "max_items", "max_queue_items", "max_batch_items"):
        if getattr(opts, name) < 1:
            raise ConfigError(f"--{name.replace('_', '-')}: must be at least 1")
    if opts.max_items > opts.max_queue_items:
        raise ConfigError(
            f"--max-items {opts.max_items} exceeds --max-queue-items {opts.max_queue_items}: one "
            f"request could never be admitted"
        )
    if (opts.workers is not None and opts.workers < 0) or (opts.timeout_s is not None and opts.timeout_s <= 0):
        raise ConfigError("--workers must be >= 0 and --timeout-s > 0")


def check_sandbox(scorers: dict, insecure: bool) -> None:
    code = [name for name, s in scorers.items() if s.runs_code]
    if not code or insecure:
        return
    from rlvr.verifiers.sandbox import isolation

    if not isolation()["uid"]:
        raise ConfigError(
            f"{', '.join(code)} runs code, and the sandbox cannot give it a uid of its own here (not "
            f"root): code would run as the service's user. Run as root, or pass --insecure"
        )


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise ConfigError(f"--host {host} --port {port}: cannot bind ({e.strerror})") from None
    sock.listen(2048)
    sock.set_inheritable(False)
    return sock


def serve(opts: ServeOptions) -> int:
    """Check everything, listen, serve until SIGTERM / SIGINT; 0 after a graceful stop."""
    check_extra()
    token = read_token(opts.token_file)
    check_options(opts, token)
    from rlvr.serve.scoring import Scheduler, build_scorers

    scorers = build_scorers(
        opts.sources or [("verifier", "math")], opts.settings, opts.task_settings, opts.workers, opts.timeout_s
    )
    check_sandbox(scorers, opts.insecure)
    sock = bind(opts.host, opts.port)
    import uvicorn  # lazy: the serve extra

    from rlvr.serve.app import create_app
    from rlvr.serve.metrics import Metrics
    from rlvr.serve.reaper import Reaper

    metrics, reaper = Metrics(), Reaper()
    scheduler = Scheduler(scorers, opts.max_queue_items, opts.max_batch_items, metrics.observe_batch)
    app = create_app(scheduler, metrics, token, opts.max_body_bytes, opts.max_items, reaper)
    # uvicorn's hint says int; it hands the value to asyncio.timeout, which takes seconds as a float
    config = uvicorn.Config(app, log_level="warning", access_log=False, timeout_graceful_shutdown=opts.grace_s)  # type: ignore[arg-type]
    server = uvicorn.Server(config)
    stops = []
    for sig in (signal.SIGTERM, signal.SIGINT):  # uvicorn re-raises the signal after its graceful stop: caught here
        signal.signal(sig, lambda s, f: stops.append(s))
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    print(
        f"rlvr serve: listening on http://{shown}:{port} ({', '.join(scorers)}; "
        f"{'bearer token' if token else 'no token'})",
        file=sys.stderr,
        flush=True,
    )
    try:
        with reaper:
            server.run(sockets=[sock])
            scheduler.close()
    finally:
        sock.close()
    print(f"rlvr serve: stopped ({scheduler.pending} items left unanswered)", file=sys.stderr, flush=True)
    return 0
