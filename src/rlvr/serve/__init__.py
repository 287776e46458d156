"""The verifiers behind HTTP: `rlvr serve` (docs/serving.md).

In: JSON requests on 127.0.0.1 (or another address with a bearer token): `POST /v1/verify` (items of completion +
gold), `POST /get_reward` (OpenRLHF's remote reward protocol). Out: one verdict per item, in order, scored by the
same code as training (rlvr.verifiers.compose.task_reward, the worker pool with per-item deadlines, the sandbox for
code); `GET /healthz`, `GET /metrics` (Prometheus text).

    items.py     a request body -> scoring jobs, or one clear error (422 naming the field, 413, 400 naming choices)
    scoring.py   the served scorers (a task's grader, a run's reward from its config, one verifier kind) and the
                 bounded queue in front of them
    metrics.py   the Prometheus metrics (requests, items by status, latency, queue depth, kills, deadline hits, guard
                 refusals apart)
    app.py       the Starlette application: routes, bearer token, body limit, JSON answers
    server.py    start-up checks (extra installed, loopback or token, sandbox uid), uvicorn, graceful SIGTERM
    reaper.py    the service as child subreaper: a dead pool worker's sandboxed processes killed and reaped

This package imports rlvr.config, rlvr.tasks and rlvr.verifiers, and rlvr.training's reward builder when a run's
config is served (`--config` / `--run`; lazily, as it loads torch). Starlette, uvicorn and prometheus-client are the
optional extra `rlvr[serve]`, imported when the service starts.
"""
