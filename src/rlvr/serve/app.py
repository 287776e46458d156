"""The Starlette application: four routes, the bearer token, the body limit, JSON answers.

    POST /v1/verify   {"items": [...]} -> {"verdicts": [{id, status, reward, extracted, detail, terms}, ...]}
    POST /get_reward  OpenRLHF's {"query", "prompts", "labels"} -> {"rewards", "scores", "extra_logs"}
    GET  /healthz     {"status": "ok", "scorers": [...], "queue_items": n}  (no token needed: it tells nothing)
    GET  /metrics     Prometheus text

Every refusal is `{"error": "<one line naming the field or the choices>"}` with its status code: 401 without the
right token, 413 for a body over the limit or too many items, 422 for malformed JSON / wrong types / missing
fields, 400 for an unknown task or verifier, 429 with `Retry-After` when the queue is full.

`reward` in a verdict is the weighted total of the scorer's terms (what a training step adds up); `terms` holds
each term's unweighted reward; `status` is the correctness term's. /get_reward answers as rlvr.integrations.openrlhf
does: `rewards` the total with faults (timeout, error, invalid_gold) as 0.0, since OpenRLHF cannot leave a sample
out; `scores` 1.0 where correct; `extra_logs` 0/1 per sample per status under `rlvr/<status>`.
"""

from __future__ import annotations

import asyncio
import hmac
import time

from rlvr.serve.items import BadRequest, Item, parse_json, reward_items, verify_items
from rlvr.verifiers.base import FAULT_STATUSES, STATUSES


async def read_body(request, limit: int) -> bytes:
    """The body, refused with 413 as soon as it is known to pass `limit` bytes (never buffered past it)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BadRequest(413, f"body: {int(declared)} bytes, more than this service takes ({limit})")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BadRequest(413, f"body: more than this service takes ({limit} bytes)")
        chunks.append(chunk)
    return b"".join(chunks)


def check_token(request, token: bytes | None) -> None:
    """401 unless `Authorization: Bearer <token>` matches (constant-time compare); no token set = open."""
    if token is None:
        return
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), token):
        raise BadRequest(401, "authorization: a valid 'Bearer <token>' header is required")


def openrlhf_answer(answers: list[dict]) -> dict:
    statuses = [a["status"] for a in answers]
    return {
        "rewards": [0.0 if a["status"] in FAULT_STATUSES else float(a["reward"]) for a in answers],
        "scores": [float(s == "correct") for s in statuses],
        "extra_logs": {f"rlvr/{s}": [float(x == s) for x in statuses] for s in STATUSES},
    }


async def _score(scheduler, items: list[Item]) -> list[dict]:
    """The items' answers in their order: admitted as one request (429 when the queue is full), each scorer's items
    sent as one batch, all batches awaited together."""
    scheduler.admit(len(items))
    groups: dict[str, list[int]] = {}
    for i, item in enumerate(items):
        groups.setdefault(item.scorer, []).append(i)
    futures = {
        name: scheduler.submit(name, [items[i].completion for i in idx], [items[i].problem for i in idx])
        for name, idx in groups.items()
    }
    answers: list = [None] * len(items)
    for name, idx in groups.items():
        for i, answer in zip(idx, await asyncio.wrap_future(futures[name])):
            answers[i] = answer
    return answers


def _refusal(e: BadRequest):
    """A refused request's answer: its status, the one-line message, Retry-After / WWW-Authenticate where they apply."""
    from starlette.responses import JSONResponse  # lazy: the serve extra

    headers = {"Retry-After": str(e.retry_after)} if getattr(e, "retry_after", None) else {}
    if e.status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    return JSONResponse({"error": e.message}, status_code=e.status, headers=headers)


def create_app(
    scheduler, metrics, token: bytes | None = None, max_body_bytes: int = 8 << 20, max_items: int = 1024, reaper=None
):
    """The ASGI app over a Scheduler (rlvr.serve.scoring) and Metrics (rlvr.serve.metrics)."""
    from starlette.applications import Starlette  # lazy: the serve extra
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    served = scheduler.scorers

    def route(path: str, parse, answer):
        async def handler(request):
            start = time.monotonic()
            try:
                check_token(request, token)
                items = parse(parse_json(await read_body(request, max_body_bytes)), served, max_items)
                response = JSONResponse(answer(items, await _score(scheduler, items)))
            except BadRequest as e:
                response = _refusal(e)
            metrics.observe_request(path, response.status_code, time.monotonic() - start)
            return response

        return Route(path, handler, methods=["POST"])

    async def healthz(request):
        return JSONResponse({"status": "ok", "scorers": list(served), "queue_items": scheduler.pending})

    async def metrics_text(request):
        try:
            check_token(request, token)
        except BadRequest as e:
            return _refusal(e)
        body, content_type = metrics.text(scheduler.pending, reaper.killed if reaper else 0)
        return Response(body, media_type=content_type)

    verify = route(
        "/v1/verify",
        verify_items,
        lambda items, answers: {"verdicts": [{"id": it.id, **a} for it, a in zip(items, answers)]},
    )
    get_reward = route("/get_reward", reward_items, lambda items, answers: openrlhf_answer(answers))
    return Starlette(routes=[verify, get_reward, Route("/healthz", healthz), Route("/metrics", metrics_text)])
