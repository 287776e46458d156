"""A request body -> the items to score, or one `BadRequest` whose message names what is wrong.

`POST /v1/verify`:

    {"items": [{"completion": "... \\boxed{4}", "answer": "4", "id": "q1"},
               {"completion": "```python ...```", "tests": ["assert f(1) == 2"], "entry_point": "f",
                "task": "humaneval"}],
     "task": "arithmetic"}                 # optional default for every item (or "verifier": "math")

Each item: `completion` (text, or a list of chat messages), the gold under the gold-column rule (the first of
`answer`, `gold`, `solution`, `ground_truth` present; code: `tests` and `entry_point`; reasoning_gym: `entry`),
optionally `id`, `prompt`, `meta`, and `task` / `verifier` naming one of the served scorers. Other keys are ignored
(a client may send its dataset's other columns).

`POST /get_reward` (OpenRLHF 0.11's remote reward protocol, openrlhf/utils/agent.py): {"query": [...],
"prompts": [...], "labels": [...]}; each query is the prompt followed by the response; the label is the gold.
Labels missing, or all null or empty, are refused (422; rlvr.tasks.rows.labels_refusal): OpenRLHF sends "" for each
when its --label_key is not given, and a reward of 0 for every sample would train on nothing. One null or empty label
among others is that sample's `invalid_gold` (reward 0), as the in-process reward_func scores it.

Status codes: 422 for a body that is not JSON, a wrong type or a missing field (the message names the field, e.g.
`items[3].completion`); 413 for too many items; 400 for a task or verifier the service does not serve (the message
names the choices).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from rlvr.tasks.base import GOLD_COLUMNS, Problem
from rlvr.tasks.rows import labels_refusal, problem_for, problem_from_row, strip_prompt

VERIFY_KEYS = ("items", "task", "verifier")
REWARD_KEYS = ("query", "prompts", "labels", "task", "verifier")


class BadRequest(Exception):
    """A request refused before anything was scored: `status` (400, 401, 413, 422, 429) and a one-line message."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message
        self.retry_after: float | None = None  # seconds, on a 429 (Retry-After)


@dataclass(frozen=True)
class Item:
    """One thing to score: which served scorer, the completion, the problem (gold), and the client's id."""

    scorer: str
    completion: object
    problem: Problem
    id: object


def type_name(value) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number" if isinstance(value, (int, float)) else type(value).__name__
    )


def parse_json(raw: bytes) -> dict:
    """The body as a JSON object, or 422 naming `body`."""
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise BadRequest(422, f"body: not JSON ({e})") from None
    if not isinstance(body, dict):
        raise BadRequest(422, f"body: expected a JSON object, got {type_name(body)}")
    return body


def check_keys(body: dict, allowed: tuple[str, ...]) -> None:
    for key in body:
        if key not in allowed:
            raise BadRequest(422, f"{key}: unknown key; choose from {', '.join(allowed)}")


def choose_scorer(where: str, task, verifier, default: str, served: dict) -> str:
    """The served scorer a request or item names (`task` or `verifier`), else `default`; 400 naming the choices."""
    if task is not None and verifier is not None:
        raise BadRequest(422, f"{where.rstrip('.') or 'body'}: give task or verifier, not both")
    for field, value, prefix in (("task", task, "task:"), ("verifier", verifier, "verifier:")):
        if value is None:
            continue
        if not isinstance(value, str):
            raise BadRequest(422, f"{where}{field}: expected a string, got {type_name(value)}")
        if prefix + value not in served:
            names = ", ".join(k.split(":", 1)[1] for k in served if k.startswith(prefix)) or "(none)"
            raise BadRequest(400, f"{where}{field}: {value!r} is not served here; choose from {names}")
        return prefix + value
    return default


def check_count(n: int, max_items: int, field: str) -> None:
    if n > max_items:
        raise BadRequest(
            413, f"{field}: {n} items, more than this service takes in one request ({max_items}); split the request"
        )


def verify_items(body: dict, served: dict, max_items: int) -> list[Item]:
    """The items of a /v1/verify body, in order (see the module doc)."""
    check_keys(body, VERIFY_KEYS)
    if "items" not in body:
        raise BadRequest(
            422, "items: missing (an array of {completion, answer | gold | solution | ground_truth | tests})"
        )
    items = body["items"]
    if not isinstance(items, list):
        raise BadRequest(422, f"items: expected an array, got {type_name(items)}")
    check_count(len(items), max_items, "items")
    default = choose_scorer("", body.get("task"), body.get("verifier"), next(iter(served)), served)
    return [_item(row, i, default, served) for i, row in enumerate(items)]


def _item(row, i: int, default: str, served: dict) -> Item:
    where = f"items[{i}]"
    if not isinstance(row, dict):
        raise BadRequest(422, f"{where}: expected an object, got {type_name(row)}")
    _check_completion(row, where)
    for key in GOLD_COLUMNS:
        if row.get(key) is not None and (isinstance(row[key], bool) or not isinstance(row[key], (str, int, float))):
            raise BadRequest(422, f"{where}.{key}: expected a string or a number, got {type_name(row[key])}")
    if not any(row.get(k) is not None for k in (*GOLD_COLUMNS, "tests", "entry")):
        raise BadRequest(422, f"{where}: no gold; give one of {', '.join(GOLD_COLUMNS)} (code: tests)")
    for key, types, what in (
        ("id", (str, int), "a string or an integer"),
        ("entry_point", str, "a string"),
        ("prompt", str, "a string"),
        ("meta", dict, "an object"),
        ("tests", (str, list, dict), "a string, an array or an object"),
    ):
        if row.get(key) is not None and (isinstance(row[key], bool) or not isinstance(row[key], types)):
            raise BadRequest(422, f"{where}.{key}: expected {what}, got {type_name(row[key])}")
    scorer = choose_scorer(f"{where}.", row.get("task"), row.get("verifier"), default, served)
    try:
        problem = problem_from_row(row, i, served[scorer].task)
    except ValueError as e:  # a task's own reader refusing the row (DatasetError)
        raise BadRequest(422, f"{where}: {e}") from None
    return Item(scorer, row["completion"], problem, row.get("id", i))


def _check_completion(row: dict, where: str) -> None:
    if "completion" not in row:
        raise BadRequest(422, f"{where}.completion: missing")
    c = row["completion"]
    if isinstance(c, str):
        return
    if isinstance(c, list) and all(isinstance(m, dict) and isinstance(m.get("content"), str) for m in c):
        return
    raise BadRequest(
        422, f"{where}.completion: expected a string or an array of {{role, content}} messages, got {type_name(c)}"
    )


def reward_items(body: dict, served: dict, max_items: int) -> list[Item]:
    """The items of an OpenRLHF /get_reward body: response = query minus its prompt, gold = the label."""
    check_keys(body, REWARD_KEYS)
    queries = body.get("query")
    if queries is None:
        raise BadRequest(422, "query: missing (OpenRLHF's list of prompt + response texts)")
    if not isinstance(queries, list):
        raise BadRequest(422, f"query: expected an array, got {type_name(queries)}")
    check_count(len(queries), max_items, "query")
    if body.get("labels") is None:  # graded against nothing, every sample would train on a reward of 0
        raise BadRequest(422, str(labels_refusal(None)))
    columns = {}
    for field in ("prompts", "labels"):
        value = body.get(field)
        if value is not None and not isinstance(value, list):
            raise BadRequest(422, f"{field}: expected an array, got {type_name(value)}")
        if value is not None and len(value) != len(queries):
            raise BadRequest(422, f"{field}: {len(value)} entries for {len(queries)} queries")
        columns[field] = value or [None] * len(queries)
    refusal = labels_refusal(columns["labels"])  # all without gold; one among others is that row's invalid_gold
    if refusal:
        raise BadRequest(422, refusal)
    scorer = choose_scorer("", body.get("task"), body.get("verifier"), next(iter(served)), served)
    out = []
    for i, (q, p, label) in enumerate(zip(queries, columns["prompts"], columns["labels"])):
        if not isinstance(q, str):
            raise BadRequest(422, f"query[{i}]: expected a string, got {type_name(q)}")
        if p is not None and not isinstance(p, str):
            raise BadRequest(422, f"prompts[{i}]: expected a string, got {type_name(p)}")
        out.append(Item(scorer, strip_prompt(q, p or ""), problem_for(label, p or "", str(i)), i))
    return out
