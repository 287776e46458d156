"""`rlvr serve`: answers equal to local scoring, every bad input refused with its exact status and message, the
bearer token, OpenRLHF's /get_reward shape, the metrics, the start-up refusals. A real service in a subprocess on
127.0.0.1 (tests/serve_util.py), every request loop bounded."""

import json
import subprocess
import sys

import pytest

from rlvr.config import RewardConfig
from rlvr.tasks import load_task
from rlvr.tasks.base import Problem
from rlvr.verifiers.compose import task_reward
from serve_util import RLVR, Service

TOKEN = "s3cret-token-for-tests"


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    token_file = tmp_path_factory.mktemp("serve") / "token"
    token_file.write_text(TOKEN + "\n")
    with Service(
        "--task",
        "arithmetic",
        "--verifier",
        "python_tests",
        "--token-file",
        str(token_file),
        "--max-items",
        "4",
        "--max-body-bytes",
        "4096",
        "--workers",
        "1",
        token=TOKEN,
    ) as s:
        yield s


ITEMS = [
    {"id": "right", "completion": "so it is \\boxed{12}", "answer": "12"},
    {"id": 7, "completion": "\\boxed{13}", "gold": 12},
    {"completion": "no box here, 12", "solution": "12"},
    {"id": "chat", "completion": [{"role": "assistant", "content": "\\boxed{3} or \\boxed{4}"}], "ground_truth": "4"},
]


def test_verdicts_equal_local_scoring_in_order(service):
    status, body, _ = service.post("/v1/verify", {"items": ITEMS})
    assert status == 200
    reward = task_reward(RewardConfig(), load_task("arithmetic"))[1]
    golds = ["12", "12", "12", "4"]
    local = reward([it["completion"] for it in ITEMS], [Problem(str(i), "", answer=g) for i, g in enumerate(golds)])
    got = body["verdicts"]
    assert [v["id"] for v in got] == ["right", 7, 2, "chat"]
    assert (
        [v["status"] for v in got]
        == [v.status for v in local.verdicts]
        == ["correct", "wrong", "no_answer", "multiple_answers"]
    )
    assert [v["reward"] for v in got] == local.total == [1.1, 0.1, 0.0, 0.0]
    assert [v["extracted"] for v in got] == [v.extracted for v in local.verdicts]
    assert got[0]["terms"] == {"correct": 1.0, "format": 1.0}


def test_a_code_item_names_the_served_verifier(service):
    item = {
        "completion": "```python\ndef sq(x):\n    return x * x\n```",
        "tests": ["assert sq(3) == 9"],
        "entry_point": "sq",
        "verifier": "python_tests",
    }
    status, body, _ = service.post(
        "/v1/verify", {"items": [item, {**item, "completion": "```python\ndef sq(x):\n    return x\n```"}]}
    )
    assert status == 200
    assert [(v["status"], v["reward"]) for v in body["verdicts"]] == [("correct", 1.0), ("wrong", 0.0)]


BAD = [
    (b"{not json", 422, "body: not JSON (Expecting property name enclosed in double quotes: line 1 column 2 (char 1))"),
    (b"[1, 2]", 422, "body: expected a JSON object, got array"),
    ({}, 422, "items: missing (an array of {completion, answer | gold | solution | ground_truth | tests})"),
    ({"items": "x"}, 422, "items: expected an array, got string"),
    ({"items": [1]}, 422, "items[0]: expected an object, got number"),
    ({"items": [{"answer": "1"}]}, 422, "items[0].completion: missing"),
    (
        {"items": [{"completion": 5, "answer": "1"}]},
        422,
        "items[0].completion: expected a string or an array of {role, content} messages, got number",
    ),
    (
        {"items": [{"completion": "x"}]},
        422,
        "items[0]: no gold; give one of answer, gold, solution, ground_truth, final_answer (code: tests)",
    ),
    ({"items": [{"completion": "x", "answer": [1]}]}, 422, "items[0].answer: expected a string or a number, got array"),
    (
        {"items": [{"completion": "x", "answer": "1", "id": 1.5}]},
        422,
        "items[0].id: expected a string or an integer, got number",
    ),
    (
        {"items": [{"completion": "x", "tests": 3}]},
        422,
        "items[0].tests: expected a string, an array or an object, got number",
    ),
    ({"items": [], "extra": 1}, 422, "extra: unknown key; choose from items, task, verifier"),
    ({"items": [], "task": 3}, 422, "task: expected a string, got number"),
    (
        {"items": [{"completion": "x", "answer": "1", "task": "arithmetic", "verifier": "math"}]},
        422,
        "items[0]: give task or verifier, not both",
    ),
    ({"items": [], "task": "gsm8k"}, 400, "task: 'gsm8k' is not served here; choose from arithmetic"),
    (
        {"items": [{"completion": "x", "answer": "1", "verifier": "math"}]},
        400,
        "items[0].verifier: 'math' is not served here; choose from python_tests",
    ),
    (
        {"items": [{"completion": "x", "answer": "1"}] * 5},
        413,
        "items: 5 items, more than this service takes in one request (4); split the request",
    ),
    (
        {"items": [{"completion": "x" * 5000, "answer": "1"}]},
        413,
        f"body: {len(json.dumps({'items': [{'completion': 'x' * 5000, 'answer': '1'}]}))} bytes, more than this service "
        f"takes (4096)",
    ),
]


@pytest.mark.parametrize("body,status,message", BAD, ids=[m[:40] for _, _, m in BAD])
def test_bad_input_gets_its_status_and_names_the_field(service, body, status, message):
    got, answer, _ = service.post("/v1/verify", body)
    assert (got, answer) == (status, {"error": message})


BAD_REWARD = [
    ({"prompts": ["a"]}, 422, "query: missing (OpenRLHF's list of prompt + response texts)"),
    ({"query": "a"}, 422, "query: expected an array, got string"),
    ({"query": ["a", 2], "labels": ["1", "2"]}, 422, "query[1]: expected a string, got number"),
    ({"query": ["a", "b"], "labels": ["1"]}, 422, "labels: 1 entries for 2 queries"),
    ({"query": ["a"], "prompts": [None, "b"], "labels": ["1"]}, 422, "prompts: 2 entries for 1 queries"),
    (
        {"query": ["a"], "labels": ["1"], "verifier": "exact"},
        400,
        "verifier: 'exact' is not served here; choose from python_tests",
    ),
    # no gold: refused as /v1/verify refuses an item without one, never a 200 of zeros to train on
    (
        {"query": ["a"], "prompts": ["a"]},
        422,
        "labels: missing (the gold per query; give OpenRLHF --label_key naming the dataset's gold column)",
    ),
    (  # what OpenRLHF sends when --label_key is not given
        {"query": ["a", "b"], "labels": ["", ""]},
        422,
        "labels: all 2 empty or null, no gold to grade against; give OpenRLHF --label_key naming the dataset's gold "
        "column",
    ),
    (
        {"query": ["a", "b", "c"], "labels": [None, " ", None]},
        422,
        "labels: all 3 empty or null, no gold to grade against; give OpenRLHF --label_key naming the dataset's gold "
        "column",
    ),
]


@pytest.mark.parametrize("body,status,message", BAD_REWARD, ids=[m[:40] for _, _, m in BAD_REWARD])
def test_bad_get_reward_input(service, body, status, message):
    assert service.post("/get_reward", body)[:2] == (status, {"error": message})


def test_get_reward_is_openrlhfs_shape(service):
    body = {
        "query": ["Q: 5+7? A: \\boxed{12}", "Q: 5+7? A: \\boxed{11}", "Q: 1+1? A: \\boxed{2}"],
        "prompts": ["Q: 5+7? A:", "Q: 5+7? A:", "Q: 1+1? A:"],
        "labels": ["12", "12", "x+"],  # a gold the answer form cannot read: invalid_gold
    }
    status, answer, _ = service.post("/get_reward", body)
    assert status == 200
    zeros = [0.0, 0.0, 0.0]
    assert answer == {
        "rewards": [1.1, 0.1, 0.0],
        "scores": [1.0, 0.0, 0.0],
        "extra_logs": {
            "rlvr/correct": [1.0, 0.0, 0.0],
            "rlvr/wrong": [0.0, 1.0, 0.0],
            "rlvr/no_answer": zeros,
            "rlvr/multiple_answers": zeros,
            "rlvr/timeout": zeros,
            "rlvr/invalid_gold": [0.0, 0.0, 1.0],
            "rlvr/error": zeros,
        },
    }


def test_get_reward_scores_a_batch_with_one_row_without_gold(service):
    """One null or empty label among others (a dataset's bad row) is that row's invalid_gold, reward 0; the others'
    answers are what they are without it, and what the in-process reward_func of the same task gives."""
    from rlvr.integrations.openrlhf import make_reward_func

    responses = ["\\boxed{12}", "\\boxed{11}", "\\boxed{12}", "\\boxed{2}"]  # 4: this service's --max-items
    prompts = [f"Q{i}:" for i in range(4)]
    for bad in ("", None):
        labels = ["12", "12", bad, "2"]
        body = {"query": [p + r for p, r in zip(prompts, responses)], "prompts": prompts, "labels": labels}
        status, answer, _ = service.post("/get_reward", body)
        assert status == 200
        assert answer["rewards"] == [1.1, 0.1, 0.0, 1.1]
        assert answer["extra_logs"]["rlvr/invalid_gold"] == [0.0, 0.0, 1.0, 0.0]
        good = [0, 1, 3]
        alone = service.post("/get_reward", {k: [v[i] for i in good] for k, v in body.items()})[1]
        assert [answer["rewards"][i] for i in good] == alone["rewards"]
        in_process = make_reward_func({"task": {"name": "arithmetic", "settings": {}}}, workers=0)
        local = in_process(body["query"], prompts, labels)
        assert local["rewards"].tolist() == pytest.approx(answer["rewards"])
        assert {k: v.tolist() for k, v in local["extra_logs"].items()} == answer["extra_logs"]


def test_the_token_is_required_except_for_healthz(service):
    one = {"items": [ITEMS[0]]}
    status, answer, headers = service.post("/v1/verify", one, token=None)
    assert (status, answer) == (401, {"error": "authorization: a valid 'Bearer <token>' header is required"})
    assert headers["www-authenticate"] == "Bearer"
    assert service.post("/v1/verify", one, token=TOKEN + "x")[0] == 401
    assert service.post("/v1/verify", one, token="")[0] == 401
    assert service.post("/get_reward", {"query": ["a"]}, token="wrong")[0] == 401
    assert service.get("/metrics", token=None)[0] == 401
    assert service.post("/v1/verify", one)[0] == 200
    status, health, _ = service.get("/healthz", token=None)
    assert (status, health) == (
        200,
        {"status": "ok", "scorers": ["task:arithmetic", "verifier:python_tests"], "queue_items": 0},
    )


def test_metrics_count_items_by_status_and_refusals(service):
    correct = 'rlvr_serve_items_total{scorer="task:arithmetic",status="correct"}'
    wrong = 'rlvr_serve_items_total{scorer="task:arithmetic",status="wrong"}'
    invalid = 'rlvr_serve_rejected_total{reason="invalid"}'
    ok = 'rlvr_serve_requests_total{code="200",route="/v1/verify"}'
    before = {k: service.metric(k) for k in (correct, wrong, invalid, ok)}
    assert service.post("/v1/verify", {"items": ITEMS[:2] + [ITEMS[0]]})[0] == 200
    assert service.post("/v1/verify", {"items": 1})[0] == 422
    after = {k: service.metric(k) for k in (correct, wrong, invalid, ok)}
    assert {k: after[k] - before[k] for k in before} == {correct: 2.0, wrong: 1.0, invalid: 1.0, ok: 1.0}
    _, text, _ = service.get("/metrics")
    assert "rlvr_serve_queue_items 0.0" in text and "rlvr_serve_request_seconds_bucket" in text


def test_a_guard_refusal_is_not_a_deadline_hit(service):
    """A power tower is refused by the math guard before evaluation (status timeout, reward 0 but the format term's
    0.1): it counts under rlvr_serve_guard_refusals_total, not as a deadline hit, since no evaluation ran."""
    hits = 'rlvr_serve_deadline_hits_total{scorer="task:arithmetic"}'
    refusals = 'rlvr_serve_guard_refusals_total{scorer="task:arithmetic"}'
    timeouts = 'rlvr_serve_items_total{scorer="task:arithmetic",status="timeout"}'
    before = {k: service.metric(k) for k in (hits, refusals, timeouts)}
    tower = {"completion": "\\boxed{2^{2^{2^{2^{2}}}}}", "answer": "4"}
    status, answer, _ = service.post("/v1/verify", {"items": [tower, tower]})
    assert status == 200
    assert [(v["status"], v["reward"], v["detail"]) for v in answer["verdicts"]] == [
        ("timeout", 0.1, "refused before evaluation: power tower of depth 4")
    ] * 2
    after = {k: service.metric(k) for k in (hits, refusals, timeouts)}
    assert {k: after[k] - before[k] for k in before} == {hits: 0.0, refusals: 2.0, timeouts: 2.0}


def test_fault_kinds_from_verdicts():
    from rlvr.serve.metrics import fault_kind

    assert [
        fault_kind({"status": s, "detail": d})
        for s, d in (
            ("timeout", "refused before evaluation: power tower of depth 4"),
            ("timeout", "worker killed after 5s"),  # the pool's hard deadline
            ("timeout", "verification exceeded 5s"),  # the in-process deadline
            ("error", "worker died while scoring"),
            ("error", "judge ended early (rc -9)"),
            ("wrong", "refused before evaluation: ..."),  # not a timeout: no fault
        )
    ] == ["guard_refused", "deadline", "deadline", "worker_died", "sandbox_killed", None]


def _refused(*args):
    proc = subprocess.run([RLVR, "serve", "--port", "0", *args], capture_output=True, text=True, timeout=120)
    return proc.returncode, proc.stderr.strip()


def test_a_non_loopback_address_without_a_token_is_refused():
    code, err = _refused("--host", "0.0.0.0")
    assert code == 2
    assert err == (
        "rlvr serve: --host 0.0.0.0 is not a loopback address: give --token-file FILE so only clients with "
        "the token can call, or --insecure to serve it open"
    )


@pytest.mark.parametrize(
    "args,message",
    [
        (
            ("--token-file", "/nonexistent/token"),
            "rlvr serve: --token-file /nonexistent/token: No such file or directory",
        ),
        (("--task", "nope"), "rlvr serve: --task: unknown task 'nope'; choose from arithmetic, reasoning_gym,"),
        (
            ("--verifier", "maths"),
            "rlvr serve: --verifier: unknown verifier kind 'maths'; choose from math, boxed_format,",
        ),
        (
            ("--max-items", "10", "--max-queue-items", "5"),
            "rlvr serve: --max-items 10 exceeds --max-queue-items 5: one request could never be admitted",
        ),
    ],
)
def test_start_up_mistakes_exit_2_in_one_line(args, message):
    code, err = _refused(*args)
    assert code == 2 and err.startswith(message) and "\n" not in err


def test_a_missing_extra_names_the_install_command():
    script = (
        "import sys; sys.modules['uvicorn'] = None; from rlvr.cli import main; sys.exit(main(['serve', '--port', '0']))"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip() == 'rlvr serve: needs the serve extra (missing: uvicorn): pip install "rlvr[serve]"'


def test_an_empty_token_file_is_refused(tmp_path):
    (tmp_path / "t").write_text("\n")
    code, err = _refused("--token-file", str(tmp_path / "t"))
    assert (code, err) == (
        2,
        f"rlvr serve: --token-file {tmp_path / 't'}: empty; write the bearer token clients will send",
    )
