"""The remote backend against real HTTP stand-ins of vLLM on loopback: the Rollouts contract, adapter pushes,
a server that dies mid-batch (its prompts retried elsewhere, the loss reported), and clear refusals."""

import copy

import pytest
import torch

from conftest import make_tiny_llama
from rlvr.policy.load import add_lora
from rlvr.sampling import make_sampler
from rlvr.sampling.remote import RemoteError
from standin_vllm import StandinServer, fixed_completion

STOP = [2]
PROMPTS = [[5, 6, 7], [8, 9], [10, 11, 12, 13], [14], [15, 16], [17, 18, 19], [20], [21, 22]]


@pytest.fixture
def lora_model():
    return add_lora(make_tiny_llama(64), r=2, alpha=4)


def sampler_for(servers, model, tokenizer, **kw):
    s = make_sampler("remote", model, tokenizer, stop_ids=STOP, urls=[x.url for x in servers], timeout_s=10, **kw)
    s.sync(model)
    return s


def expected(prompts, n, max_new):
    rows = [fixed_completion(p, j, max_new, STOP) for p in prompts for j in range(n)]
    return [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]


def test_rollouts_contract(lora_model, tokenizer):
    with StandinServer() as server:
        s = sampler_for([server], lora_model, tokenizer)
        ro = s.generate(PROMPTS[:3], 4, max_new_tokens=8, temperature=1.0, generator=torch.Generator().manual_seed(0))
    rows, logps, finish = expected(PROMPTS[:3], 4, 8)
    width = max(len(r) for r in rows)
    assert ro.completion_ids.shape == ro.mask.shape == ro.sampler_logp.shape == (12, width)
    assert ro.group_ids.tolist() == [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2]
    assert ro.finish == finish and "stop" in finish and "length" in finish
    for b, (r, lp) in enumerate(zip(rows, logps)):
        assert ro.completion_ids[b, : len(r)].tolist() == r and ro.mask[b].sum() == len(r)
        torch.testing.assert_close(ro.sampler_logp[b, : len(r)], torch.tensor(lp))
        assert (ro.completion_ids[b, len(r) :] == s.pad_id).all() and (ro.sampler_logp[b, len(r) :] == 0).all()
    assert ro.texts == tokenizer.batch_decode(rows, skip_special_tokens=True)
    assert ro.num_generated_tokens == sum(len(r) for r in rows) and ro.prompt_ids == PROMPTS[:3]


def test_sync_pushes_a_new_adapter_and_requests_name_it(lora_model, tokenizer):
    with StandinServer() as server:
        s = sampler_for([server], lora_model, tokenizer)
        s.sync(lora_model)
        s.generate(PROMPTS[:1], 2, max_new_tokens=4)
        calls = [(path, body.get("lora_name") or body.get("model")) for path, body in server.log]
        assert calls == [
            ("/v1/load_lora_adapter", "rlvr-policy-1"),
            ("/v1/load_lora_adapter", "rlvr-policy-2"),
            ("/v1/unload_lora_adapter", "rlvr-policy-1"),
            ("/v1/completions", "rlvr-policy-2"),
        ]
        assert list(server.adapters) == ["rlvr-policy-2"]
        # another rank follows the name without pushing anything
        follower = make_sampler("remote", lora_model, tokenizer, stop_ids=STOP, urls=[server.url])
        follower.sync(lora_model, push=False)
        follower.sync(lora_model, push=False)
        assert follower.adapter_name == "rlvr-policy-2" and len(server.log) == 4


def test_a_server_dying_mid_batch_is_reported_and_its_prompts_retried(lora_model, tokenizer):
    with StandinServer(die_after=2) as dying, StandinServer() as healthy:
        s = sampler_for([dying, healthy], lora_model, tokenizer)
        with pytest.warns(RuntimeWarning, match="lost"):
            ro = s.generate(PROMPTS, 3, max_new_tokens=6)
        assert [u for u, _ in s.lost] == [dying.url] and s.live == [healthy.url]
        assert dying.served == 2 and dying.completions > 2  # later requests were dropped without a reply
        assert healthy.served == len(PROMPTS) - dying.served
    rows, logps, finish = expected(PROMPTS, 3, 6)
    assert ro.finish == finish
    for b, r in enumerate(rows):
        assert ro.completion_ids[b, : len(r)].tolist() == r


def test_no_server_left_is_an_error(lora_model, tokenizer):
    with StandinServer() as server:
        s = sampler_for([server], lora_model, tokenizer)
    with pytest.warns(RuntimeWarning), pytest.raises(RemoteError, match="every rollout server is lost"):
        s.generate(PROMPTS[:2], 2, max_new_tokens=4)


def test_refusals_are_clear(lora_model, tokenizer):
    plain = make_tiny_llama(64)
    with pytest.raises(ValueError, match="weight-update API"):  # a full fine-tune cannot reach the servers
        make_sampler("remote", plain, tokenizer, stop_ids=STOP, urls=["http://127.0.0.1:1"]).sync(plain)
    with pytest.raises(ValueError, match="rollout.urls"):
        make_sampler("remote", lora_model, tokenizer, stop_ids=STOP, urls=[])
    s = make_sampler("remote", lora_model, tokenizer, stop_ids=STOP, urls=["http://127.0.0.1:1"])
    with pytest.raises(RemoteError, match="call sync"):
        s.generate(PROMPTS[:1], 1, max_new_tokens=2)


def test_a_model_without_adapter_samples_the_servers_base_model(tokenizer):
    """A starting model (no adapter) is what the servers serve: its requests name the base model that
    /v1/models lists first, and nothing is pushed."""
    with StandinServer() as server:
        s = make_sampler("remote", make_tiny_llama(64), tokenizer, stop_ids=STOP, urls=[server.url])
        ro = s.generate(PROMPTS[:2], 3, max_new_tokens=6)
        assert [(path, body["model"]) for path, body in server.log] == [("/v1/completions", "standin-base")] * 2
    rows, _, finish = expected(PROMPTS[:2], 3, 6)
    assert ro.finish == finish and [ro.completion_ids[b, : len(r)].tolist() for b, r in enumerate(rows)] == rows


def test_episodes_through_the_remote_backend_are_token_in_token_out(tokenizer):
    """Multi-turn episodes over HTTP: every turn's request carries exactly the episode's ids so far (token in), and
    the episode's policy ids are exactly the ids the server returned (token out), with the environment's spliced
    in between; the first turn asks once per problem with n = G."""
    from rlvr.environments.episode import run_episodes
    from rlvr.environments.protocol import Step
    from rlvr.tasks.base import Problem

    class Answers:
        tools = {}

        def __init__(self):
            self.n = 0

        def reset(self, problem):
            return [{"role": "user", "content": problem.prompt}]

        def step(self, turn):
            self.n += 1
            done = self.n == 3
            return Step([] if done else [{"role": "user", "content": f"go on ({self.n})"}], done=done)

    model = add_lora(make_tiny_llama(len(tokenizer)), r=2, alpha=4)
    stop = [tokenizer.eos_token_id]
    problems = [Problem("a", "first question"), Problem("b", "second question")]
    with StandinServer() as server:
        s = make_sampler("remote", model, tokenizer, stop_ids=stop, urls=[server.url], timeout_s=10)
        s.sync(model)
        rows = [p for p in problems for _ in range(2)]
        episodes = run_episodes(
            s, tokenizer, [Answers() for _ in rows], rows, max_turns=3, max_total_tokens=400, max_new_tokens=6
        )
        asked = [b for path, b in server.log if path == "/v1/completions"]
    assert [(len(b["prompt"]), b["n"]) for b in asked[:2]] == [(len(episodes[0].prompt_ids), 2)] * 2  # n = G
    prompts = [tuple(b["prompt"]) for b in asked]
    for row, ep in enumerate(episodes):
        starts = [i for i, m in enumerate(ep.mask) if m == 1 and (i == 0 or ep.mask[i - 1] == 0)]
        assert len(starts) == len(ep.turn_tokens) == 3
        for turn, (start, n) in enumerate(zip(starts, ep.turn_tokens)):
            prompt = ep.prompt_ids + ep.ids[:start]
            assert tuple(prompt) in prompts  # token in: the ids so far, nothing re-rendered
            sample = row % 2 if turn == 0 else 0  # the first turn's G samples, then one a row
            assert ep.ids[start : start + n] == fixed_completion(prompt, sample, 6, stop)[0]  # token out
        assert all(m in (0.0, 1.0) for m in ep.mask) and sum(ep.mask) == sum(ep.turn_tokens)


@pytest.mark.parametrize(
    "server_kind, temperature, refusal",
    [
        ("same model", 0.7, None),
        ("same model, raw log-probs", 1.0, None),  # at temperature 1 raw and processed log-probs are the same
        ("same model, raw log-probs", 0.7, "start it with --logprobs-mode processed_logprobs"),
        ("another model", 1.0, "does not serve this policy's base model"),
        ("same model, trainer under bf16 autocast", 1.0, None),
    ],
)
def test_a_server_is_checked_before_the_first_step(tiny_policy, server_kind, temperature, refusal):
    """With the training temperature (build_sampler passes it), the sampler asks each server for a few tokens of its
    base model and scores them itself: another model, or log-probs of the untempered logits, is refused in one line
    naming the server, the cause and the measured gap; the right server passes, also when the trainer holds its
    frozen base in bf16 for bf16 autocast (train.autocast: auto on a bf16 CPU; that check used to fail on the dtypes)."""
    from rlvr.policy.load import cast_frozen_base
    from standin_vllm import model_scorer

    model, tok = tiny_policy
    with torch.no_grad():  # a random model's logits are nearly flat; a trained model's are peaked, as here
        model.model.norm.weight.mul_(20.0)
    torch.manual_seed(1)
    other = make_tiny_llama(len(tok))  # same shape, other weights: a server of another model
    scorer = {
        "same model": model_scorer(model),
        "same model, raw log-probs": model_scorer(model, tempered=False),
        "another model": model_scorer(other),
        "same model, trainer under bf16 autocast": model_scorer(copy.deepcopy(model)),  # the server's own float32 copy
    }[server_kind]
    policy = add_lora(model, r=2, alpha=4)
    if "bf16" in server_kind:
        assert cast_frozen_base(policy, torch.bfloat16) == 14  # 2 layers x 7 LoRA-wrapped linears
    with StandinServer(scorer=scorer) as server:
        build = lambda: make_sampler(  # noqa: E731
            "remote", policy, tok, stop_ids=STOP, urls=[server.url], temperature=temperature
        )
        if refusal is None:
            assert build().live == [server.url]
        else:
            with pytest.raises(RemoteError, match=refusal) as e:
                build()
            assert server.url in str(e.value) and "nats over 16 sampled tokens" in str(e.value)


def test_a_restarted_trainer_pushes_names_the_server_still_holds(lora_model, tokenizer):
    """A resumed run (or a trainer restarted after a crash) counts its adapters from 1 again, while the servers
    still hold the names the first one pushed: the push replaces them in place (vLLM refuses a second load of a
    name with HTTP 400 otherwise), and the completions name the new one."""
    with StandinServer() as server:
        sampler_for([server], lora_model, tokenizer)
        second = sampler_for([server], lora_model, tokenizer)
        second.generate(PROMPTS[:1], 2, max_new_tokens=4)
        loads = [body for path, body in server.log if path == "/v1/load_lora_adapter"]
        assert [b["lora_name"] for b in loads] == ["rlvr-policy-1", "rlvr-policy-1"]
        assert all(b["load_inplace"] for b in loads)
        assert server.adapters == {"rlvr-policy-1": str(second.adapter_dir / "rlvr-policy-1")}
