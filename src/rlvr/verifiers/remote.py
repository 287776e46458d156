"""Reward term kind `remote`: score through one or more `rlvr serve` services over HTTP (stdlib only).

    reward:
      terms: [{kind: remote, urls: [http://10.0.0.5:8000, http://10.0.0.6:8000], token_env: RLVR_SERVE_TOKEN}]

A batch is cut into chunks of `batch_items`; each chunk goes to the next URL in turn (round robin), the chunks of
one batch in parallel, one at a time per URL. A chunk that fails (connection refused or reset, timeout, 5xx, 429)
goes to the next URL (failover); after a pass over every URL the client waits `backoff_s * 2**round` (or what a
429's Retry-After asks, at most 30 s) and tries again, `retries` more passes at most. Items are pure, so sending
one twice is safe. After the budget, the chunk's items get `error` verdicts: the step goes on, training leaves
them out, and the step's `verdict/error_frac` shows them. A refusal that a retry cannot fix (400, 401, 413, 422:
a wrong token, an unserved task, a malformed item) also gives `error`, with the service's message, printed once.

Each verdict is the service's: `status` of its correctness term, `reward` the weighted total of its terms (what
a local reward with the same task would add up), `extracted`, `detail`. The service grades with its `--task`
(or `task` / `verifier` here, naming one it serves). Problems with neither answer nor tests are not sent: they are
`invalid_gold`, as every local verifier grades them.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

from rlvr.verifiers.base import STATUSES, Verdict

RETRY_CODES = (429, 500, 502, 503, 504)
MAX_WAIT_S = 30.0


class RemoteError(Exception):
    """A chunk that failed; `retry` says whether another URL or a later try could succeed."""

    def __init__(self, message: str, retry: bool, wait_s: float = 0.0):
        super().__init__(message)
        self.retry, self.wait_s = retry, wait_s


class RemoteVerifier:
    name = "remote"

    def __init__(
        self,
        urls,
        token_env: str | None = None,
        task: str | None = None,
        verifier: str | None = None,
        timeout_s: float = 120.0,
        retries: int = 3,
        backoff_s: float = 0.5,
        batch_items: int = 256,
    ):
        if isinstance(urls, str):
            urls = [urls]
        if (
            not isinstance(urls, list)
            or not urls
            or not all(isinstance(u, str) and u.startswith(("http://", "https://")) for u in urls)
        ):
            raise ValueError(
                f"urls: give a list of http:// or https:// addresses of `rlvr serve` services, got {urls!r}"
            )
        if token_env is not None and not os.environ.get(token_env):
            raise ValueError(f"token_env: the environment variable {token_env!r} is not set")
        if task is not None and verifier is not None:
            raise ValueError("give task or verifier, not both")
        self.urls = [u if u.rstrip("/").endswith("/v1/verify") else u.rstrip("/") + "/v1/verify" for u in urls]
        self.token_env, self.task, self.verifier = token_env, task, verifier
        self.timeout_s, self.retries, self.backoff_s = float(timeout_s), int(retries), float(backoff_s)
        self.batch_items = max(1, int(batch_items))
        self._turn = itertools.count()
        self._said: set[str] = set()
        self._lock = threading.Lock()

    def score(self, completion, problem) -> Verdict:
        return self.score_many([completion], [problem])[0]

    def score_many(self, completions: list, problems: list) -> list[Verdict]:
        """B verdicts in order, whatever the services do (never raises for a service's fault)."""
        out: list[Verdict | None] = [None] * len(completions)
        send = []
        for i, (c, p) in enumerate(zip(completions, problems)):
            item = wire_item(i, c, p)
            if item is None:
                out[i] = Verdict("invalid_gold", 0.0, None, "no answer and no tests to send")
            else:
                send.append(item)
        chunks = [send[k : k + self.batch_items] for k in range(0, len(send), self.batch_items)]
        with ThreadPoolExecutor(max_workers=max(1, min(len(self.urls), len(chunks)))) as pool:
            for chunk, verdicts in zip(chunks, pool.map(self._chunk, chunks)):
                for item, v in zip(chunk, verdicts):
                    out[item["id"]] = v
        return out  # type: ignore[return-value]

    def _chunk(self, items: list[dict]) -> list[Verdict]:
        body = {
            "items": items,
            **({"task": self.task} if self.task else {}),
            **({"verifier": self.verifier} if self.verifier else {}),
        }
        start, n, last = next(self._turn), len(self.urls), ""
        for round_ in range(self.retries + 1):
            wait = self.backoff_s * 2**round_
            for k in range(n):
                url = self.urls[(start + k) % n]
                try:
                    return self._post(url, body, len(items))
                except RemoteError as e:
                    last = f"{url}: {e}"
                    if not e.retry:
                        self._say(last)
                        return [Verdict("error", 0.0, None, f"remote: {last}"[:300])] * len(items)
                    wait = max(wait, e.wait_s)
            if round_ < self.retries:
                time.sleep(min(wait, MAX_WAIT_S))
        self._say(f"gave up after {self.retries + 1} passes over {n} URL(s); last: {last}")
        why = f"remote: {self.retries + 1} passes failed; last {last}"[:300]
        return [Verdict("error", 0.0, None, why)] * len(items)

    def _post(self, url: str, body: dict, n: int) -> list[Verdict]:
        headers = {"Content-Type": "application/json"}
        if self.token_env:
            headers["Authorization"] = f"Bearer {os.environ.get(self.token_env, '')}"
        request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                answer = json.loads(response.read())
        except urllib.error.HTTPError as e:
            message = _error_text(e)
            retry_after = e.headers.get("Retry-After", "") if e.headers else ""
            raise RemoteError(
                f"HTTP {e.code}: {message}", e.code in RETRY_CODES, float(retry_after) if retry_after.isdigit() else 0.0
            ) from None
        except (urllib.error.URLError, OSError, ValueError) as e:  # refused, reset, timed out, a torn body
            raise RemoteError(f"{type(e).__name__}: {getattr(e, 'reason', e)}", True) from None
        return _verdicts(answer, n)

    def _say(self, message: str) -> None:
        with self._lock:
            if message not in self._said:
                self._said.add(message)
                print(f"rlvr: reward term remote: {message}", file=sys.stderr, flush=True)


def wire_item(i: int, completion, problem) -> dict | None:
    """The /v1/verify item for one problem (id = its position), or None when it carries no gold to send."""
    answer = problem if isinstance(problem, str) else getattr(problem, "answer", None)
    tests = getattr(problem, "tests", None)
    meta = dict(getattr(problem, "meta", None) or {})
    if (answer is None or str(answer) == "") and not tests and "entry" not in meta:
        return None
    item = {"id": i, "completion": completion}
    if answer is not None:
        item["answer"] = str(answer)
    if tests:
        item["tests"] = tests
    if meta.get("entry_point") is not None:
        item["entry_point"] = meta["entry_point"]
    if "entry" in meta:  # reasoning_gym's generator item: the task reads it from the row
        item["entry"] = meta["entry"]
    try:
        json.dumps(meta)
        item["meta"] = meta
    except (TypeError, ValueError):  # what cannot travel stays here; the graders read answer, tests, entry_point
        pass
    return item


def _error_text(e) -> str:
    try:
        return str(json.loads(e.read()).get("error", ""))[:200]
    except (ValueError, OSError, AttributeError):
        return str(e.reason)


def _verdicts(answer, n: int) -> list[Verdict]:
    verdicts = answer.get("verdicts") if isinstance(answer, dict) else None
    if not isinstance(verdicts, list) or len(verdicts) != n:
        raise RemoteError(f"answer is not {n} verdicts", True)
    out = []
    for v in verdicts:
        if not isinstance(v, dict) or v.get("status") not in STATUSES:
            raise RemoteError("answer holds a malformed verdict", True)
        out.append(Verdict(v["status"], float(v.get("reward", 0.0)), v.get("extracted"), str(v.get("detail", ""))))
    return out
