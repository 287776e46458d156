"""Data parallel on 2 gloo ranks changes nothing but speed: one update on 2 ranks with half the groups each gives
the loss and the weights of 1 rank with every group (same fixed rollouts), for every aggregation mode; and a
short training run on 2 ranks logs the metrics of the 1-rank run."""

import copy
import dataclasses
import os
import socket

import pytest
import torch
import torch.multiprocessing as tmp

from conftest import make_tiny_llama, save_tiny_model
from rlvr.algorithms import get_preset
from rlvr.policy.update import UpdateSettings, update_policy
from rlvr.tasks import load_task
from rlvr.tasks.base import Problem
from rlvr.training import distributed
from rlvr.training.batch import StepBatch, select_rows
from rlvr.verifiers.base import Verdict

WORLD = 2
G, GROUPS, T = 2, 6, 6  # 6 groups of 2 rows: 3 groups (6 rows) per rank

# (name, preset, overrides of the preset, update kwargs, advantages (12,) or None for the default pattern)
CASES = [
    ("grpo", "grpo", {}, {}, None),  # seq-mean-token-mean, token ratio
    ("dapo", "dapo", {}, {}, None),  # token-mean, asymmetric clip
    ("dr_grpo", "dr_grpo", {}, {}, None),  # seq-mean-token-sum-norm
    ("gspo", "gspo", {}, {}, None),  # sequence-level ratio
    ("grpo_kl", "grpo", {"beta": 0.04}, {}, None),  # k3 KL to a frozen reference
    ("dapo_clipped", "dapo", {}, {"max_grad_norm": 0.05}, None),  # clipping must see the global norm
    ("grpo_mu2", "grpo", {}, {"mu": 2}, None),  # two passes: old log-probs, clipping
    # rank 1's three groups are constant (advantage 0): it trains on nothing, yet must take the same step
    ("idle_rank", "dapo", {}, {}, [1.0, -1.0, 0.5, -0.5, 2.0, -2.0] + [0.0] * 6),
]
DEFAULT_ADV = [1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 0.3, -0.3, -1.5, 1.5, 0.8, -0.8]


def make_batch(advantages, seed=0) -> StepBatch:
    """12 rows in 6 groups of 2 (prompt-major), random lengths 1..T, fixed token ids."""
    g = torch.Generator().manual_seed(seed)
    b = len(advantages)
    lengths = torch.randint(1, T + 1, (b,), generator=g)
    mask = (torch.arange(T)[None, :] < lengths[:, None]).float()
    prompts = [torch.randint(4, 60, (int(n),), generator=g).tolist() for n in torch.randint(2, 6, (b,), generator=g)]
    return StepBatch(
        problems=[Problem(id=str(i // G), prompt="q", answer="1") for i in range(b)],
        prompt_ids=prompts,
        completion_ids=torch.randint(4, 60, (b, T), generator=g) * mask.long(),
        mask=mask,
        sampler_logp=torch.zeros(b, T),
        group_ids=torch.arange(b) // G,
        lengths=lengths,
        finish=["stop"] * b,
        texts=[""] * b,
        verdicts=[Verdict("wrong", 0.0)] * b,
        rewards=torch.zeros(b),
        terms={},
        advantages=torch.tensor(advantages, dtype=torch.float32),
    )


def run_case(case, comm=None, fsdp=False, device="cpu"):
    """The update of `case` on this rank's block of the batch (the whole batch without comm); with fsdp, the
    model sharded over the ranks by FSDP2; with device, the model there (the batch stays on the CPU, as in a run).
    Returns (the update's figures, the weights after it, on the CPU)."""
    _, preset, over, kwargs, adv = case
    algo = dataclasses.replace(get_preset(preset), **over)
    batch = make_batch(adv or DEFAULT_ADV)
    if comm is not None:
        rows = [r for r in range(len(batch)) if int(batch.group_ids[r]) in comm.shard(range(GROUPS))]
        batch = select_rows(batch, rows)
        batch.advantages = make_batch(adv or DEFAULT_ADV).advantages[rows]
    model = make_tiny_llama(64, seed=3).to(device)
    ref = copy.deepcopy(model).eval().requires_grad_(False) if algo.beta > 0 else None
    if fsdp:
        distributed.shard_model(model, comm)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    args = dict(pad_id=0, temperature=1.0, micro_batch_size=3, max_grad_norm=1e9, autocast="none", norm_len=T)
    stats = update_policy(model, opt, batch, algo, UpdateSettings(**{**args, **kwargs}), ref_model=ref, comm=comm)
    full = {k: v.full_tensor() if hasattr(v, "full_tensor") else v for k, v in model.state_dict().items()}
    return stats, {k: v.detach().to("cpu", copy=True) for k, v in full.items()}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(autouse=True)
def _restore_threads():
    """The 1-rank references here run on one thread; give later tests back the process's thread count
    (an exact-resume test elsewhere compares this process with a child that has the default count)."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def launch(fn, port, *args):
    """Run fn(rank, *args) on WORLD spawned processes with the environment torchrun would set."""
    tmp.spawn(_entry, args=(fn, port, args), nprocs=WORLD, join=True)


def _entry(rank, fn, port, args):
    os.environ.update(
        {
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "WORLD_SIZE": str(WORLD),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
        }
    )
    torch.set_num_threads(1)  # two ranks share two cores
    fn(rank, *args)


def _rank_main(rank, out_dir, train_cfgs, tokenizer_dir):
    """One spawn for every 2-rank check (process start and imports dominate): the update cases, then the runs."""
    from transformers import AutoTokenizer

    from rlvr.training.loop import train

    comm = distributed.setup()
    assert (comm.rank, comm.world) == (rank, WORLD)
    results = {case[0]: run_case(case, comm) for case in CASES}
    for case in CASES:  # FSDP2 on gloo: a fresh Comm, since shard_model marks its Comm as sharded
        results["fsdp/" + case[0]] = run_case(case, distributed.Comm(comm.rank, comm.world), fsdp=True)
    torch.save(results, os.path.join(out_dir, f"rank{rank}.pt"))
    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    for train_cfg in train_cfgs:
        train(train_cfg, policy=(make_tiny_llama(len(tok)), tok), quiet=True)
    comm.close()


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory, tokenizer, server):
    """The folder holding each rank's update results (rank{r}.pt), the task data and the 2-rank run ("two")."""
    import json

    out = tmp_path_factory.mktemp("dp")
    (out / "data.jsonl").write_text(
        "".join(
            json.dumps({"id": f"q{i}", "prompt": f"Say something about {i}.", "answer": "[a-d]"}) + "\n"
            for i in range(40)
        )
    )
    tokenizer.save_pretrained(out / "tok")
    save_tiny_model(tokenizer, out / "student")  # the tokenizer a distillation run checks its teacher's against
    make_tiny_llama(len(tokenizer), seed=7).save_pretrained(out / "teacher")
    tokenizer.save_pretrained(out / "teacher")
    runs = [
        train_config(out / "two", out / "data.jsonl", server.url),
        distill_config(out / "two-distill", out, server.url),
    ]
    launch(_rank_main, free_port(), str(out), runs, str(out / "tok"))
    return out


def distill_config(out_dir, folder, url):
    """train_config's run with a teacher (another tiny model, whole): per-token advantages on each rank's block."""
    cfg = train_config(out_dir, folder / "data.jsonl", url)
    cfg["model"]["name"] = str(folder / "student")
    cfg["distill"].update(teacher=str(folder / "teacher"), coef=0.5)
    return cfg


@pytest.fixture(scope="module")
def two_rank_updates(two_ranks):
    return [torch.load(two_ranks / f"rank{r}.pt") for r in range(WORLD)]


@pytest.mark.parametrize("mode", ["dp", "fsdp"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_two_ranks_take_the_one_rank_step(case, mode, two_rank_updates):
    """dp: full replicas, gradients summed; fsdp: the model sharded by FSDP2 (idle ranks pad micro-batches)."""
    torch.set_num_threads(1)
    ref_stats, ref_weights = run_case(case)
    for rank_results in two_rank_updates:
        stats, weights = rank_results[case[0] if mode == "dp" else "fsdp/" + case[0]]
        assert stats["loss"] == pytest.approx(ref_stats["loss"], abs=1e-6)
        assert stats["grad_norm"] == pytest.approx(ref_stats["grad_norm"], rel=1e-5)
        for key in ("clip/low_frac", "clip/high_frac", "train_tokens", "active_rows", "skipped"):
            assert stats[key] == pytest.approx(ref_stats[key], abs=1e-6), key
        for name, w in ref_weights.items():
            torch.testing.assert_close(weights[name], w, atol=1e-6, rtol=1e-5, msg=name)
    # the step moved the weights (a no-op update would match trivially)
    assert any(not torch.equal(w, make_tiny_llama(64, seed=3).state_dict()[n]) for n, w in ref_weights.items())


def test_shard_is_contiguous_and_covers_everything():
    comms = [distributed.Comm(r, 3) for r in range(3)]
    assert [c.shard(range(7)) for c in comms] == [[0, 1], [2, 3], [4, 5, 6]]
    assert [c.shard(range(6)) for c in comms] == [[0, 1], [2, 3], [4, 5]]


def test_one_rank_comm_is_a_no_op():
    comm = distributed.setup()
    assert (comm.rank, comm.world, comm.is_main, comm.seed_offset) == (0, 1, True, 0)
    assert comm.all_sum(3, torch.tensor(2.0)) == [3, torch.tensor(2.0)]
    assert comm.any(False) is False and comm.all_gather("x") == ["x"]


def train_config(out_dir, data, url):
    """DAPO (dynamic sampling, token-mean) with batch-scaled advantages, rollouts from the stand-in server: the
    rollouts are fixed by the prompts, so 1 and 2 ranks see the same completions."""
    from rlvr.config import resolve

    sets = [
        f"output_dir={out_dir}",
        "task.name=jsonl",
        f"task.settings={{path: {data}}}",
        'reward.terms=[{name: first_char, kind: regex, weight: 1.0, pattern: "^\\\\s*(\\\\S)", gold_is_pattern: true}]',
        "reward.workers=0",
        "algorithm={preset: dapo, adv_scale: batch, max_sampling_rounds: 2, overlong: filter}",
        "rollout.backend=remote",
        f"rollout.urls=[{url}]",
        "rollout.prompts_per_step=4",
        "rollout.group_size=4",
        "rollout.max_new_tokens=8",
        "train.steps=2",
        "train.lr=0.05",
        "train.micro_batch_size=4",
        # float32 throughout (the class default before issue 64's `auto`): one rank and two agree to 1e-5 only
        # there; under bf16 autocast their different splits of the batch round apart (grad norm 3e-4 relative)
        "train.autocast=none",
        "log.samples_every=1",
        "log.checkpoint_every=1",
        "model.lora.r=4",
    ]
    cfg = resolve(None, sets)
    # the demonstration the figures were written with, as written: demo "auto" would measure on each rank first
    cfg["task"]["settings"]["demo"] = load_task("jsonl", path=str(data)).demo
    # and the system prompt (the jsonl task's default asks for steps since issue 72): with other prompts the two-node
    # grad_norm at step 4 differs from one process's by 1.6e-4 relative, past the 1e-5 these figures hold to
    cfg["task"]["settings"]["system_prompt"] = "Solve the problem. Put the final answer inside \\boxed{}."
    return cfg


@pytest.mark.parametrize("teacher", [False, True], ids=["rlvr", "distill"])
def test_two_rank_training_run_logs_the_one_rank_metrics(two_ranks, tokenizer, server, teacher):
    """With a teacher (distill_config), each rank scores its own block and the per-token advantages and the
    distill/* sums merge as one process's would; dynamic sampling is off with a teacher, so no refill round."""
    import json

    from safetensors.torch import load_file

    from rlvr.training.loop import train

    torch.set_num_threads(1)
    tmp_path = two_ranks
    one, two = ("one-distill", "two-distill") if teacher else ("one", "two")
    make = distill_config(tmp_path / one, tmp_path, server.url) if teacher else None
    train(
        make or train_config(tmp_path / one, tmp_path / "data.jsonl", server.url),
        policy=(make_tiny_llama(len(tokenizer)), tokenizer),
        quiet=True,
    )
    rows = {n: [json.loads(x) for x in (tmp_path / n / "metrics.jsonl").read_text().splitlines()] for n in (one, two)}
    assert [r["step"] for r in rows[two]] == [0, 1]
    if teacher:
        assert all(r["distill/tokens"] > 0 and r["distill/share"] > 0.01 for r in rows[one])
    else:
        assert any(r["dynamic_sampling/generated_groups"] > 4 for r in rows[one])  # a refill round happened
    for a, b in zip(rows[one], rows[two]):
        assert a.keys() == b.keys()
        for key in a:
            if not key.startswith(("time/", "throughput/")):
                assert b[key] == pytest.approx(a[key], rel=1e-5, abs=1e-6), key
    samples = {n: (tmp_path / n / "samples.jsonl").read_text() for n in (one, two)}
    assert samples[one] == samples[two]
    wa, wb = (load_file(tmp_path / n / "checkpoints" / "step-2" / "trainable.safetensors") for n in (one, two))
    assert wa.keys() == wb.keys() and any(wa[k].abs().max() > 0 for k in wa if "lora_B" in k)
    # AdamW divides by sqrt(v): on a near-zero gradient the rounding of a different summation order (1e-9) is
    # magnified, so weights after Adam steps agree to 1e-4, not 1e-6; the SGD step above checks the gradient exactly
    for k in wa:
        torch.testing.assert_close(wb[k], wa[k], atol=1e-4, rtol=1e-4)
    assert json.loads((tmp_path / two / "checkpoints" / "step-2" / "loop_state.json").read_text())["world_size"] == 2


def test_resume_on_another_rank_count_is_refused():
    from rlvr.config import ConfigError

    distributed.check_resume(distributed.Comm(), {"step": 3})  # saved before scale-out: one rank
    with pytest.raises(ConfigError, match="saved on 2 rank"):
        distributed.check_resume(distributed.Comm(), {"step": 3, "world_size": 2})


TORCHRUN_SCRIPT = """
import os, sys, pathlib
sys.path.insert(0, {tests!r})
import torch
torch.set_num_threads(1)
from transformers import AutoTokenizer
from conftest import make_tiny_llama, save_tiny_model
from test_distributed import train_config
from rlvr.training.loop import train
out, url = pathlib.Path(sys.argv[1]), sys.argv[2]
tok = AutoTokenizer.from_pretrained(out / "tok")
for name, first in (("full", 3), ("resumed", 2)):
    cfg = train_config(out / name, out / "data.jsonl", url)
    cfg["train"]["steps"] = first
    train(cfg, policy=(make_tiny_llama(len(tok)), tok), quiet=True)
cfg["train"]["steps"] = 3
train(cfg, resume=True, allow_config_change=True, policy=(make_tiny_llama(len(tok)), tok), quiet=True)
"""


@pytest.mark.slow
def test_torchrun_two_ranks_resume_continues_exactly(two_ranks, server, tmp_path):
    """Under a real `torchrun` (the trainer joins the group from its environment): a 2-rank run stopped after 2
    steps and resumed to 3 logs what the uninterrupted 2-rank run logs."""
    import json
    import shutil
    import subprocess
    import sys

    shutil.copytree(two_ranks / "tok", tmp_path / "tok")
    shutil.copy(two_ranks / "data.jsonl", tmp_path / "data.jsonl")
    script = tmp_path / "run.py"
    script.write_text(TORCHRUN_SCRIPT.format(tests=os.path.dirname(__file__)))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node",
            str(WORLD),
            str(script),
            str(tmp_path),
            server.url,
        ],
        check=True,
        timeout=600,
        capture_output=True,
    )
    drop = lambda r: {k: v for k, v in r.items() if not k.startswith(("time/", "throughput/"))}  # noqa: E731
    a, b = (
        [drop(json.loads(x)) for x in (tmp_path / n / "metrics.jsonl").read_text().splitlines()]
        for n in ("full", "resumed")
    )
    assert [r["step"] for r in b] == [0, 1, 2] and a == b


def test_only_rank_0_checks_the_output_dir(tmp_path):
    """Rank 0 makes the run directory. Another rank that checked it once rank 0 had made it was refused (here:
    "exists"; with rank 0's lock taken: "in use by a running rlvr process"), a race two torchrun nodes lost."""
    from rlvr.config import Config, resolve
    from rlvr.rundir.files import RunDirError
    from rlvr.training.lifecycle import open_run

    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")  # a model folder as far as the start-up's check goes
    cfg = resolve(None, [f"output_dir={tmp_path / 'run'}", f"model.name={tmp_path / 'model'}"])
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.yaml").write_text("written by rank 0\n")
    opened = open_run(Config.from_dict(cfg), cfg["output_dir"], is_main=False)
    assert opened.run is None and opened.path == tmp_path / "run"
    with pytest.raises(RunDirError, match="exists; pass --resume"):  # rank 0 still refuses a folder in the way
        open_run(Config.from_dict(cfg), cfg["output_dir"])
