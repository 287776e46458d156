"""Reward term `remote`: scoring through `rlvr serve` gives the local verdicts (failover past a dead URL
included), the token travels, a budget spent gives `error` verdicts, and `rlvr train` through two services trains
exactly as it does locally (same rewards, same updates) on the tiny model, a dead service in the list included."""

import json
import os
import socket
import textwrap
import threading

import pytest

from rlvr.cli import main
from rlvr.config import RewardConfig
from rlvr.tasks import load_task
from rlvr.verifiers.compose import build_reward, task_reward
from serve_util import Service, wait_for


def dead_url() -> str:
    """A loopback port nothing listens on (bound, then closed)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def arithmetic():
    with Service("--task", "arithmetic", "--workers", "1") as s:
        yield s


def completions_for(problems):
    forms = ["so \\boxed{%s}", "\\boxed{%s1}", "no box: %s", "\\boxed{%s} or \\boxed{0}", "<answer>%s</answer>"]
    return [forms[i % len(forms)] % p.answer for i, p in enumerate(problems)]


def test_remote_verdicts_equal_local_scoring_with_failover(arithmetic):
    task = load_task("arithmetic")
    problems = task.problems("train")[:10]
    texts = completions_for(problems)
    local = task_reward(RewardConfig(), task)[1](texts, problems)
    terms = [{"kind": "remote", "urls": [dead_url(), arithmetic.url], "backoff_s": 0.05, "batch_items": 3}]
    remote = build_reward(RewardConfig(terms=terms))(texts, problems)
    assert [(v.status, v.reward, v.extracted) for v in remote.verdicts] == [
        (v.status, t, v.extracted) for v, t in zip(local.verdicts, local.total)
    ]
    assert remote.total == local.total
    assert {v.status for v in local.verdicts} == {"correct", "wrong", "no_answer", "multiple_answers"}


def test_after_the_retry_budget_items_are_error_and_nothing_raises(capsys):
    url = dead_url()
    reward = build_reward(RewardConfig(terms=[{"kind": "remote", "urls": [url], "retries": 1, "backoff_s": 0.01}]))
    task = load_task("arithmetic")
    result = reward(["\\boxed{1}", "\\boxed{2}"], task.problems("train")[:2])
    assert [(v.status, v.reward) for v in result.verdicts] == [("error", 0.0), ("error", 0.0)]
    assert result.verdicts[0].detail.startswith(f"remote: 2 passes failed; last {url}/v1/verify: URLError:")
    assert capsys.readouterr().err.startswith("rlvr: reward term remote: gave up after 2 passes over 1 URL(s)")


def test_the_token_travels_and_a_wrong_one_is_an_error_verdict(tmp_path, monkeypatch):
    (tmp_path / "token").write_text("t0ken")
    task = load_task("arithmetic")
    problems = task.problems("train")[:2]
    with Service("--task", "arithmetic", "--workers", "0", "--token-file", str(tmp_path / "token")) as s:
        monkeypatch.setenv("RLVR_TEST_TOKEN", "t0ken")
        good = build_reward(RewardConfig(terms=[{"kind": "remote", "urls": [s.url], "token_env": "RLVR_TEST_TOKEN"}]))
        assert [v.status for v in good([f"\\boxed{{{p.answer}}}" for p in problems], problems).verdicts] == [
            "correct",
            "correct",
        ]
        monkeypatch.setenv("RLVR_TEST_TOKEN", "wrong")
        bad = build_reward(RewardConfig(terms=[{"kind": "remote", "urls": [s.url], "token_env": "RLVR_TEST_TOKEN"}]))
        verdicts = bad(["\\boxed{1}", "\\boxed{2}"], problems).verdicts
    assert [v.status for v in verdicts] == ["error", "error"]
    assert verdicts[0].detail == (
        f"remote: {s.url}/v1/verify: HTTP 401: authorization: a valid 'Bearer <token>' header is required"
    )


@pytest.mark.parametrize(
    "term,message",
    [
        ({"kind": "remote"}, "reward.terms[0]: bad settings for kind 'remote'"),
        ({"kind": "remote", "urls": ["ftp://x"]}, "urls: give a list of http:// or https:// addresses"),
        (
            {"kind": "remote", "urls": ["http://x"], "token_env": "RLVR_NOT_SET_ANYWHERE"},
            "token_env: the environment variable 'RLVR_NOT_SET_ANYWHERE' is not set",
        ),
        (
            {"kind": "remote", "urls": ["http://x"], "port": 3},
            "reward.terms[0].port: unknown setting for kind 'remote'",
        ),
    ],
)
def test_remote_term_mistakes_are_config_errors(term, message):
    from rlvr.config import ConfigError

    with pytest.raises(ConfigError, match=None) as e:
        build_reward(RewardConfig(terms=[term]))
    assert message in str(e.value)


GRADER = '''
from rlvr.verifiers.base import Verdict


class LengthParity:
    """1 for a completion of an even number of characters: a grader the tiny random model earns half the time."""

    name = "length_parity"
    cheap = True

    def score(self, completion, problem):
        n = len(completion)
        return Verdict("correct" if n % 2 == 0 else "wrong", float(n % 2 == 0), str(n), "")
'''


def _train(run, model_dir, terms: str) -> list[dict]:
    sets = [
        f"model.name={model_dir}",
        f"reward.terms={terms}",
        "reward.workers=0",
        "rollout.backend=hf",
        "rollout.prompts_per_step=2",
        "rollout.group_size=4",
        "rollout.max_new_tokens=6",
        "train.steps=2",
        "train.time_budget_min=0",
        "train.micro_batch_size=8",
        "log.samples_every=1",
        "log.eval_every=0",
        "eval.out_of_domain=[]",
        "model.lora.r=4",
    ]
    assert main(["train", "default", *sum((["--set", s] for s in sets), []), "--output-dir", str(run)]) == 0
    return [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]


def test_train_through_two_services_equals_local_training(tmp_path, model_dir, monkeypatch):
    """Two steps of `rlvr train` on the tiny model, scored locally and through two services (the first URL dead;
    the second service SIGKILLed once step 0 is logged and restarted on its port): every reward and every update
    the same, no step lost."""
    (tmp_path / "parity_grader.py").write_text(textwrap.dedent(GRADER))
    monkeypatch.syspath_prepend(str(tmp_path))
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    args = ("--verifier", "parity_grader:LengthParity")
    local = _train(tmp_path / "local", model_dir, "[{kind: 'parity_grader:LengthParity'}]")
    run, box = tmp_path / "remote", {}
    with Service(*args, env=env) as a, Service(*args, env=env) as b:
        port_b = int(b.url.rsplit(":", 1)[1])

        def kill_and_restart_b():
            assert wait_for(
                lambda: (run / "metrics.jsonl").exists() and (run / "metrics.jsonl").read_text(), timeout=300
            )
            b.proc.kill()  # SIGKILL, between steps 0 and 1
            b.proc.wait(timeout=30)
            box["b"] = Service(*args, env=env, port=port_b)

        chaos = threading.Thread(target=kill_and_restart_b, daemon=True)
        chaos.start()
        try:
            # three chunks a step: round robin spreads them over both services
            terms = f"[{{kind: remote, urls: [{dead_url()}, {a.url}, {b.url}], backoff_s: 0.05, batch_items: 3}}]"
            remote = _train(run, model_dir, terms)
            chaos.join(timeout=120)
            served_a = a.metric('rlvr_serve_requests_total{code="200",route="/v1/verify"}')
        finally:
            if "b" in box:
                box["b"].close()
    assert [r["step"] for r in remote] == [0, 1] and "b" in box
    assert 0 < served_a < 6  # A took its share of the six chunks (and B's while B was down), not all of them
    mine_term = "reward/parity_grader:LengthParity/mean"
    same = [k for k in local[0] if not k.startswith(("time/", "throughput/")) and k != mine_term]
    for mine, theirs in zip(local, remote):
        assert {k: theirs.get(k) for k in same} == {k: mine[k] for k in same}
        assert theirs["reward/remote/mean"] == mine[mine_term] == mine["reward/mean"]
    assert 0 < local[0]["reward/mean"] < 1  # the grader paid some completions and not others


def test_the_openrlhf_adapter_scores_through_a_url(arithmetic):
    """A reward spec naming the remote kind is all an adapter needs (rlvr.integrations.rewards)."""
    from rlvr.integrations.openrlhf import make_reward_func

    out = make_reward_func({"kind": "remote", "urls": [arithmetic.url]})(
        ["Q: 2+2? A: \\boxed{4}", "Q: 2+2? A: \\boxed{5}"], ["Q: 2+2? A:", "Q: 2+2? A:"], ["4", "4"]
    )
    assert out["rewards"].tolist() == [1.100000023841858, 0.10000000149011612]  # float32 of 1.1 and 0.1
    assert out["scores"].tolist() == [1.0, 0.0]
