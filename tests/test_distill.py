"""On-policy distillation (rlvr.algorithms.distill, rlvr.training.teacher): the per-token advantage by hand, the
sampled estimator against the exact reverse KL, a teacher identical to the student changing nothing, the per-token
update's micro-batch invariance, every teacher form in a run, and the refusals before anything is written."""

import contextlib
import copy
import json
import math

import pytest
import torch

from conftest import make_tiny_llama
from rlvr.algorithms.distill import distill_advantages, distill_figures, distill_sums
from rlvr.policy.update import UpdateSettings, scored_logprobs
from rlvr.training.loop import train
from test_trainer import tiny_config
from test_update import make_batch, run_update


def test_the_per_token_advantage_by_hand():
    adv = torch.tensor([1.0, -0.5])
    sampler = torch.tensor([[-1.0, -2.0, -0.5], [-3.0, -0.1, 0.0]])
    teacher = torch.tensor([[-1.5, -2.0, -4.0], [-0.5, -0.2, -9.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    # d = sampler - teacher = [[0.5, 0, 3.5], [-2.5, 0.1, (9, masked)]]; clipped at 2: [[0.5, 0, 2], [-2, 0.1, -]]
    got = distill_advantages(adv, sampler, teacher, mask, coef=0.5, clip=2.0)
    want = torch.tensor([[1.0 - 0.25, 1.0, 1.0 - 1.0], [-0.5 + 1.0, -0.5 - 0.05, 0.0]])
    torch.testing.assert_close(got, want)
    alone = distill_advantages(adv, sampler, teacher, mask, coef=0.5, clip=2.0, verifier=False)
    torch.testing.assert_close(alone, want - torch.tensor([[1.0, 1.0, 1.0], [-0.5, -0.5, 0.0]]))
    sums = distill_sums(adv, got, sampler, teacher, mask, clip=2.0)
    # 5 tokens; sum d (unclipped) = 0.5 + 0 + 3.5 - 2.5 + 0.1 = 1.6; clipped: 3.5 and -2.5; |term| = coef * |clip(d)|
    # = 0.25 + 0 + 1 + 1 + 0.05 = 2.3; |v A| per token = 3 * 1 + 2 * 0.5 = 4
    assert sums == pytest.approx({"tokens": 5, "reverse_kl": 1.6, "clipped": 2, "term": 2.3, "verifier": 4.0})
    figures = distill_figures(sums)
    assert figures == pytest.approx(
        {"distill/reverse_kl": 0.32, "distill/clipped_frac": 0.4, "distill/share": 2.3 / 6.3, "distill/tokens": 5}
    )


def test_the_sampled_estimator_is_the_exact_reverse_kl_on_a_toy_vocabulary():
    """Tokens drawn from the student p: the mean of log p(x) - log q(x) (distill/reverse_kl, unclipped) estimates
    KL(p || q) = sum_x p(x) log(p(x) / q(x)) without bias: within three standard errors over 40,000 draws."""
    g = torch.Generator().manual_seed(0)
    log_p = torch.randn(7, generator=g).log_softmax(-1)
    log_q = (2 * torch.randn(7, generator=g)).log_softmax(-1)
    exact = float((log_p.exp() * (log_p - log_q)).sum())
    x = torch.multinomial(log_p.exp(), 40_000, replacement=True, generator=g)
    d = (log_p[x] - log_q[x])[None]
    ones = torch.ones_like(d)
    sums = distill_sums(torch.zeros(1), torch.zeros_like(d), log_p[x][None], log_q[x][None], ones, clip=1e9)
    estimate = distill_figures(sums)["distill/reverse_kl"]
    stderr = float(d.std()) / math.sqrt(d.numel())
    assert exact > 0.3 and abs(estimate - exact) < 3 * stderr, (estimate, exact, stderr)


def test_a_teacher_identical_to_the_student_adds_nothing():
    """Scored by the student's own forward, the teacher's term is 0 on every token, so the per-token update is the
    one with coef 0, weight for weight."""
    model = make_tiny_llama(64, seed=3)
    batch = make_batch([1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 0.3, -0.3])
    s = UpdateSettings(pad_id=0, micro_batch_size=3, norm_len=6)
    batch.sampler_logp = scored_logprobs(model, batch, s)  # the student as it sampled
    teacher_logp = scored_logprobs(copy.deepcopy(model), batch, s)
    token_adv = distill_advantages(batch.advantages, batch.sampler_logp, teacher_logp, batch.mask, coef=1.0, clip=2.0)
    assert torch.equal(token_adv, batch.advantages[:, None] * batch.mask)
    plain, _ = run_update(batch, "grpo", micro=3)
    distilled = copy.copy(batch)
    distilled.advantages = token_adv
    with_teacher, _ = run_update(distilled, "grpo", micro=3)
    for a, b in zip(plain.parameters(), with_teacher.parameters()):
        assert torch.equal(a, b)


@pytest.mark.parametrize("autocast", ["none", "bfloat16"])
@pytest.mark.parametrize("control", ["none", "constant"])
def test_a_teacher_on_the_groups_without_signal_scores_only_those_rows(control, autocast):
    """distill.rows no_signal: four groups of two; the correctness term differs in groups 0 and 2 (the verifier's
    signal), is 0 in both rows of group 1 and 1 in both of group 3. The teacher's model runs on the four rows of groups
    1 and 3 only (counted by a forward hook on it); those rows get exactly what rows "all" gives them without the
    control (with it, the mean over their tokens alone), the other rows keep the group advantage on every trained
    token, and the figures count the scored tokens only."""
    from rlvr.config import DistillConfig
    from rlvr.policy.teacher import ModelTeacher
    from rlvr.training.teacher import distill_batch, scored_rows

    batch = make_batch([1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 0.3, -0.3])
    batch.terms = {"correct": [1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0], "format": [1.0] * 8}
    s = UpdateSettings(pad_id=0, micro_batch_size=8, norm_len=6, autocast=autocast)  # both of `auto`'s paths
    teacher = ModelTeacher(make_tiny_llama(64, seed=7), torch.device("cpu"), "t")
    seen = []
    teacher.model.register_forward_hook(
        lambda mod, args, kwargs, out: seen.append(len(kwargs["input_ids"])), with_kwargs=True
    )
    want = copy.deepcopy(batch)
    distill_batch(teacher, want, DistillConfig(teacher="t", coef=1.0), s)  # rows "all"
    assert sum(seen) == 8
    seen.clear()
    got = copy.deepcopy(batch)
    distill_batch(teacher, got, DistillConfig(teacher="t", coef=1.0, rows="no_signal", control=control), s)
    rows = scored_rows(batch, "no_signal")
    assert rows.tolist() == [False, False, True, True, False, False, True, True] and sum(seen) == 4
    plain = batch.advantages[:, None] * batch.mask
    assert torch.equal(got.advantages[~rows], plain[~rows])
    if control == "none":
        torch.testing.assert_close(got.advantages[rows], want.advantages[rows])
    else:  # every scored token's term is the mean of the scored tokens' clipped terms
        terms = (plain - got.advantages)[rows][batch.mask[rows] > 0]
        assert float(terms.max() - terms.min()) < 1e-6
    assert got.stats["distill_sum/tokens"] == float(batch.mask[rows].sum())
    verifier = float(plain.abs().sum())  # the verifier's part over every trained token, scored or not
    assert got.stats["distill_sum/verifier"] == pytest.approx(verifier)


@pytest.mark.parametrize("preset", ["grpo", "dapo", "gspo", "dr_grpo"])
def test_per_token_advantages_are_micro_batch_invariant(preset):
    batch = make_batch([1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 0.3, -0.3])
    g = torch.Generator().manual_seed(5)
    batch.advantages = (batch.advantages[:, None] + torch.randn(batch.mask.shape, generator=g)) * batch.mask
    ref, s_ref = run_update(batch, preset, micro=8)
    for micro, tokens in ((1, 0), (3, 0), (8, 7)):
        model, s = run_update(batch, preset, micro=micro, tokens=tokens)
        assert s["loss"] == pytest.approx(s_ref["loss"], abs=1e-6)
        for a, b in zip(ref.parameters(), model.parameters()):
            torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)
    # a row whose group advantage is 0 still trains on its tokens' teacher terms
    zero = make_batch([0.0] * 8)
    zero.advantages = torch.randn(zero.mask.shape, generator=g) * zero.mask
    _, stats = run_update(zero, preset, micro=8)
    assert stats["active_rows"] == 8 and stats["grad_norm"] > 0


def distill_run(tmp_path, model_dir, name, **over):
    """A 2-step run of the tiny model (the test data's regex reward) with `over`; its metrics rows."""
    cfg = tiny_config(tmp_path / name, **{"model.name": str(model_dir), "rollout.backend": "fast", **over})
    run = train(cfg, quiet=True, report=False)
    return run, [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]


def test_a_whole_model_teacher_equal_to_the_start_scores_the_first_step_as_the_student(tmp_path, model_dir):
    """The teacher is the policy's own start model, loaded as a whole model: at step 0 (the adapter's B is 0, so the
    policy is its base) the sampled reverse KL is the float32 sampler-vs-trainer gap, ~0; the figures are there and
    the teacher's time counted; a run without a teacher has none of them."""
    run, rows = distill_run(
        tmp_path, model_dir, "a", **{"distill.teacher": str(model_dir), "distill.coef": 1.0, "rollout.dtype": "float32"}
    )
    from rlvr.training.run_report import write_run_report

    report = write_run_report(run).read_text()  # the run's report shows the teacher's figures beside the others
    assert "| sampled reverse KL to the teacher (`distill/reverse_kl`) |" in report
    first = rows[0]
    assert abs(first["distill/reverse_kl"]) < 1e-4 and first["distill/clipped_frac"] == 0.0
    assert first["distill/tokens"] == first["mismatch/tokens"] > 0 and first["time/teacher"] > 0
    assert 0 <= first["distill/share"] < 1e-3  # the teacher's term is ~0 beside the verifier's
    _, plain = distill_run(tmp_path, model_dir, "b", **{"rollout.dtype": "float32"})
    assert not [k for k in plain[0] if k.startswith("distill/") or k == "time/teacher"]


def test_a_runs_adapter_teaches_on_the_policys_own_weights_and_a_resume_is_exact(tmp_path, model_dir):
    """The teacher: a 2-step run's final adapter on the same base, switched to on the student's own base weights.
    The student's adapter alone trains and is saved; resumed from step 2, the run is the uninterrupted one."""
    from safetensors.torch import load_file

    from rlvr.config import as_config
    from rlvr.training.teacher import resolve_teacher

    teacher_run, _ = distill_run(tmp_path, model_dir, "teacher", **{"train.lr": 0.2})
    sets = {"distill.teacher": str(teacher_run), "distill.coef": 0.5, "train.steps": 3}
    spec = resolve_teacher(as_config(tiny_config(tmp_path / "x", **{"model.name": str(model_dir), **sets})))
    assert (spec.form, spec.where) == ("adapter", str(teacher_run / "final" / "adapter"))
    full, rows = distill_run(tmp_path, model_dir, "full", **sets)
    # the teacher differs from the start model: its term is a part of every step's advantage. The sampled reverse KL
    # over 64 tokens is an estimate of either sign (0.007 here; 0.013 with the head's whole logits, the teacher's two
    # lr-0.2 Adam steps amplifying float-level differences); a teacher equal to the start scores < 1e-4 (above)
    assert abs(rows[0]["distill/reverse_kl"]) > 1e-3 and all(r["distill/share"] > 0.05 for r in rows)
    assert sorted(p.name for p in (full / "final" / "adapter").iterdir() if p.is_dir()) == []  # no teacher/ inside
    saved = load_file(full / "final" / "adapter" / "adapter_model.safetensors")
    assert saved and all(".teacher" not in k for k in saved)
    short = tiny_config(tmp_path / "resumed", **{"model.name": str(model_dir), "rollout.backend": "fast", **sets})
    short["train"]["steps"] = 2
    train(short, quiet=True, report=False)
    short["train"]["steps"] = 3
    resumed = train(short, resume=True, allow_config_change=True, quiet=True, report=False)
    timing = ("time/", "throughput/")
    again = [json.loads(x) for x in (resumed / "metrics.jsonl").read_text().splitlines()]
    assert [{k: v for k, v in r.items() if not k.startswith(timing)} for r in rows] == [
        {k: v for k, v in r.items() if not k.startswith(timing)} for r in again
    ]
    wa = load_file(full / "checkpoints" / "step-3" / "trainable.safetensors")
    wb = load_file(resumed / "checkpoints" / "step-3" / "trainable.safetensors")
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
    assert all(".teacher." not in k for k in wa)


def test_distillation_alone_trains_where_the_verifier_gives_nothing(tmp_path, model_dir):
    """A reward no completion earns: every group is zero-variance, so RLVR alone makes no update and the signal
    watch says so; with the teacher's term alone (distill.verifier false) every step trains, and nothing is said."""
    never = '[{name: never, kind: regex, weight: 1.0, pattern: "^QQQQ$"}]'
    _, alone = distill_run(tmp_path, model_dir, "rl", **{"reward.terms": never})
    assert all(r["groups/nonzero_var_frac"] == 0 and r.get("active_rows", 0) == 0 for r in alone)
    teacher = save_tiny_model_seeded(tmp_path / "other-teacher", seed=7)
    run, rows = distill_run(
        tmp_path,
        model_dir,
        "distill",
        **{"reward.terms": never, "distill.teacher": str(teacher), "distill.coef": 1.0, "distill.verifier": False},
    )
    assert all(r["active_rows"] == 8 and r["grad_norm"] > 0 and r["distill/share"] == 1.0 for r in rows)
    assert not (run / "signal.json").exists()


def save_tiny_model_seeded(folder, seed):
    """Another tiny Llama (other weights) with the real tokenizer, as a model folder."""
    from transformers import AutoTokenizer

    from rlvr.policy.load import DEFAULT_MODEL, embedded_gguf

    gguf = embedded_gguf(DEFAULT_MODEL)
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    make_tiny_llama(len(tok), seed=seed).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def other_vocabulary_model(folder):
    """A tiny Llama whose tokenizer has one token more than the policy's: a teacher of another vocabulary."""
    from transformers import AutoTokenizer

    from rlvr.policy.load import DEFAULT_MODEL, embedded_gguf

    gguf = embedded_gguf(DEFAULT_MODEL)
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    tok.add_tokens(["<teacher-only>"])
    make_tiny_llama(len(tok)).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


@pytest.mark.parametrize(
    "case, want",
    [
        ("no teacher", "rlvr train: distill.coef = 0.5 needs distill.teacher: a run directory, a PEFT adapter folder"),
        ("not a model", "rlvr train: distill.teacher = {x}: not a run directory, a PEFT adapter folder"),
        ("unreachable hub id", "rlvr train: model 'nobody/no-such-teacher' is not in the hub cache"),
        ("other vocabulary", "rlvr train: distill.teacher = {x}: its tokenizer (49153 tokens) is not the policy's"),
        ("served, temperature 0.7", "rlvr train: distill.urls with rollout.temperature = 0.7: vLLM gives prompt"),
        ("served, no server", "rlvr train: distill.urls = ['{url}']: no teacher server answered (every teacher server"),
        ("served, another model", "rlvr train: teacher server {url} serves standin-base, not distill.teacher = {x}"),
        ("no_signal rows, no verifier", "rlvr train: distill.rows = no_signal with distill.verifier = false: the "),
    ],
)
def test_a_teacher_that_cannot_teach_is_refused_before_anything_is_written(
    tmp_path, model_dir, capsys, monkeypatch, case, want
):
    """Each refusal in one line, exit 2, no run directory; a served teacher's servers are asked before it is made."""
    from rlvr.cli import main
    from standin_vllm import StandinServer

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    x = {
        "no teacher": "",
        "not a model": str((tmp_path / "notes").mkdir() or tmp_path / "notes"),
        "unreachable hub id": "nobody/no-such-teacher",
        "other vocabulary": str(other_vocabulary_model(tmp_path / "other-vocab")) if case == "other vocabulary" else "",
    }.get(case, "served-teacher")
    sets = {"model.name": str(model_dir), "distill.coef": 0.5, "distill.teacher": x}
    if case == "no_signal rows, no verifier":
        sets |= {"distill.rows": "no_signal", "distill.verifier": "false"}
    with contextlib.ExitStack() as stack:
        url = stack.enter_context(StandinServer()).url if case == "served, another model" else "http://127.0.0.1:9"
        if case.startswith("served"):
            sets |= {"distill.urls": f"[{url}]", "rollout.temperature": 0.7 if "0.7" in case else 1.0}
        out = tmp_path / "run"
        args = sum((["--set", f"{k}={v}"] for k, v in sets.items()), [])
        capsys.readouterr()  # what making the test's models printed
        assert main(["train", "default", *args, "--output-dir", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith(want.format(x=x, url=url)), err
    assert not out.exists()


def test_a_served_teacher_scores_as_the_same_model_in_process_and_survives_a_lost_server(tokenizer):
    """Two stand-in servers of the teacher (vLLM's prompt_logprobs protocol); one dies after its first request: its
    rows go to the other, and every row's log-probs are the in-process teacher's (float32, to rounding)."""
    from rlvr.policy.teacher import ModelTeacher
    from rlvr.sampling.remote_teacher import RemoteTeacher
    from standin_vllm import BASE_MODEL, StandinServer, model_scorer

    teacher = make_tiny_llama(len(tokenizer), seed=7)
    batch = make_batch([1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 0.3, -0.3])
    s = UpdateSettings(pad_id=0, micro_batch_size=3, norm_len=6)
    want = ModelTeacher(copy.deepcopy(teacher), torch.device("cpu"), "in process").logprobs(batch, s)
    scorer = model_scorer(teacher)
    with StandinServer(scorer=scorer, tokenizer=tokenizer, die_after=1) as a:
        with StandinServer(scorer=scorer, tokenizer=tokenizer) as b:
            served = RemoteTeacher([a.url, b.url], BASE_MODEL, tokenizer)
            with pytest.warns(RuntimeWarning, match=f"teacher server {a.url} lost"):
                got = served.logprobs(batch, s)
    assert served.live == [b.url] and b.served >= 7
    assert got.shape == want.shape and float((got - want).abs().max()) < 1e-4
    assert torch.equal(got == 0, batch.mask == 0)  # 0 off the mask, and a real log-prob on it


def test_a_served_teacher_names_what_the_server_cannot_do(tokenizer):
    """A row that fills the server's --max-model-len (vLLM refuses max_tokens 0, and the teacher asks 1 past the row),
    refused naming the flag; servers whose engine died (HTTP 500: what vLLM's CPU build does with --enable-lora and
    concurrent prompt_logprobs), the run's error says to serve the teacher without it."""
    from rlvr.sampling.remote import RemoteError
    from rlvr.sampling.remote_teacher import LORA_HINT, RemoteTeacher
    from standin_vllm import BASE_MODEL, StandinServer, model_scorer

    batch = make_batch([1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 0.3, -0.3])
    longest = max(len(p) + int(n) for p, n in zip(batch.prompt_ids, batch.lengths))
    s = UpdateSettings(pad_id=0)
    scorer = model_scorer(make_tiny_llama(len(tokenizer), seed=7))
    with StandinServer(scorer=scorer, tokenizer=tokenizer, max_model_len=longest + 1) as roomy:
        assert RemoteTeacher([roomy.url], BASE_MODEL, tokenizer).logprobs(batch, s).shape == batch.mask.shape
    with StandinServer(scorer=scorer, tokenizer=tokenizer, max_model_len=longest) as tight:
        with pytest.raises(RemoteError) as e:
            RemoteTeacher([tight.url], BASE_MODEL, tokenizer).logprobs(batch, s)
    assert str(e.value) == (
        f"teacher server {tight.url} holds {longest} positions (--max-model-len); a row of {longest} prompt and "
        f"completion tokens needs {longest + 1}: start it with a larger --max-model-len"
    )
    with StandinServer(scorer=scorer, tokenizer=tokenizer, engine_dead=True) as dead:
        served = RemoteTeacher([dead.url], BASE_MODEL, tokenizer)
        with pytest.warns(RuntimeWarning, match="HTTP 500"), pytest.raises(RemoteError) as e:
            served.logprobs(batch, s)
    assert str(e.value).startswith("every teacher server is lost") and str(e.value).endswith(LORA_HINT)


@pytest.mark.parametrize("wrong", ["another name", "another tokenizer"])
def test_a_server_that_cannot_teach_is_refused(tokenizer, wrong):
    from rlvr.sampling.remote import ServerMismatch
    from rlvr.sampling.remote_teacher import RemoteTeacher
    from standin_vllm import BASE_MODEL, StandinServer, model_scorer

    def by_character(text, add_special_tokens=True):  # a server whose model splits text otherwise
        return {"input_ids": [ord(c) for c in text]}

    served_tok = by_character if wrong == "another tokenizer" else tokenizer
    with StandinServer(scorer=model_scorer(make_tiny_llama(len(tokenizer))), tokenizer=served_tok) as server:
        name = "some/other-model" if wrong == "another name" else BASE_MODEL
        with pytest.raises(ServerMismatch) as e:
            RemoteTeacher([server.url], name, tokenizer)
    why = f"serves {BASE_MODEL}, not distill.teacher = some/other-model" if wrong == "another name" else "tokenizes"
    assert why in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("where", ["served teacher", "episodes", "sampled ahead"])
def test_the_teacher_scores_what_the_run_trains(tmp_path, model_dir, tokenizer, where):
    """A served teacher through distill.urls; retry episodes (the teacher scores the policy's ids only: the
    environment's are masked, so it scored exactly the tokens the update trained); rows sampled ahead from the
    weights before the last update, scored with the behaviour log-probs recorded then. Each step trains with the
    teacher's figures."""
    from standin_vllm import BASE_MODEL, StandinServer, model_scorer

    teacher = save_tiny_model_seeded(tmp_path / "teacher", seed=7)
    sets = {"distill.teacher": str(teacher), "distill.coef": 0.5}
    if where == "episodes":
        sets |= {"episode.environment": "retry", "episode.attempts": 2}
    if where == "sampled ahead":
        sets |= {"rollout.max_staleness": 1}
    with StandinServer(scorer=model_scorer(teacher), tokenizer=tokenizer) as server:
        if where == "served teacher":
            sets |= {"distill.teacher": BASE_MODEL, "distill.urls": f"[{server.url}]"}
        _, rows = distill_run(tmp_path, model_dir, "run", **sets)
    assert [r["step"] for r in rows] == [0, 1]
    for r in rows:
        assert r["distill/tokens"] == r["mismatch/tokens"] > 0 and r["distill/share"] > 0.01 and r["grad_norm"] > 0
    if where == "served teacher":
        assert server.served == sum(r["active_rows"] for r in rows)  # one scoring request a trained row
    if where == "episodes":
        assert all(r["episode/turns"] >= 1 for r in rows)


def test_the_constant_control_keeps_the_terms_size_and_drops_its_information():
    adv = torch.tensor([1.0, -0.5])
    sampler = torch.tensor([[-1.0, -2.0, -0.5], [-3.0, -0.1, 0.0]])
    teacher = torch.tensor([[-1.5, -2.0, -4.0], [-0.5, -0.2, -9.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    got = distill_advantages(adv, sampler, teacher, mask, coef=0.5, clip=2.0, control="constant")
    mean = (0.5 + 0 + 2 - 2 + 0.1) / 5  # the clipped terms' mean over the 5 tokens
    want = torch.tensor([[1.0, 1.0, 1.0], [-0.5, -0.5, 0.0]]) - 0.5 * mean * mask
    torch.testing.assert_close(got, want)


def test_the_main_job_with_a_teacher_reports_it_and_each_models_reverse_kl(tmp_path, model_dir):
    """`rlvr run --teacher` is the main job with distill.teacher set: the teacher is evaluated as a fourth model
    (its pass@1 the ceiling), and the report's section gives the start and RLVR models' held-out reverse KL to it, the
    figures its files hold; --teacher leaves a coefficient given with --set as it is."""
    from rlvr.cli.run import TEACHER_COEF, add_parser
    from rlvr.training.main_job import run_main

    teacher = save_tiny_model_seeded(tmp_path / "teacher", seed=7)
    sets = {
        "model.name": str(model_dir),
        "output_dir": str(tmp_path / "main"),
        "train.steps": 2,
        "log.eval_every": 0,
        "eval.n": 2,
        "eval.ks": "[1, 2]",
        "eval.limit": 6,
        "eval.out_of_domain": "[]",
        "sft.epochs": 1,
        "distill.teacher": str(teacher),
        "distill.coef": 0.5,
        "rollout.backend": "fast",
    }
    out = run_main(tiny_config(tmp_path, **sets), quiet=True)
    root = tmp_path / "main"
    assert set(out["compare"]["models"]) == {"start", "sft", "rlvr", "teacher"}
    assert (root / "eval" / "teacher" / "summary.json").exists()
    report = (root / "report.md").read_text()
    assert "## Distillation: reverse KL to the teacher" in report
    for name in ("start", "rlvr"):
        kl = json.loads((root / "eval" / name / "teacher_kl.json").read_text())
        assert kl["problems"] == 6 and kl["tokens"] > 0 and kl["lo"] <= kl["value"] <= kl["hi"]
        assert f"| {name} | {kl['value']:.3f} [{kl['lo']:.3f}, {kl['hi']:.3f}] | 6 | {kl['tokens']} |" in report
    rows = [json.loads(x) for x in (root / "rlvr" / "metrics.jsonl").read_text().splitlines()]
    assert all(r["distill/tokens"] > 0 for r in rows)
    # the flag: the teacher, and the coefficient unless the command line gives one
    import argparse

    from rlvr.cli.run import run_sets
    from rlvr.config import resolve

    verb = add_parser(argparse.ArgumentParser().add_subparsers())
    for extra, coef in (([], TEACHER_COEF), (["--set", "distill.coef=0.3"], 0.3)):
        cfg = resolve("default", run_sets(verb.parse_args(["--teacher", "runs/t", *extra])))
        assert (cfg["distill"]["teacher"], cfg["distill"]["coef"]) == ("runs/t", coef)
