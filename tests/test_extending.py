"""docs/extending.md, executed: a task, a grader and a loss written outside rlvr, given as package.module:attr, train
two steps from the command line; the registries' shape; a misspelled reference exits 2 in one line, before any load."""

import json
import re
from pathlib import Path

import pytest
import torch

from rlvr.algorithms.losses import SURROGATES, policy_loss
from rlvr.cli import main
from rlvr.registry import ALL, ConfigError, Registry, load_attr

DOC = Path(__file__).resolve().parent.parent / "docs" / "extending.md"


@pytest.fixture
def ext(tmp_path, monkeypatch):
    """The doc's module, written to a temporary folder on sys.path as my_rlvr_ext."""
    code = re.search(r"```python\n# my_rlvr_ext.py\n(.*?)```", DOC.read_text(), re.S).group(1)
    folder = tmp_path / "ext"
    folder.mkdir()
    (folder / "my_rlvr_ext.py").write_text(code)
    monkeypatch.syspath_prepend(str(folder))
    import importlib

    return importlib.import_module("my_rlvr_ext")


def test_a_user_task_grader_and_loss_train_two_steps_from_the_command_line(tmp_path, ext, model_dir):
    run = tmp_path / "run"
    sets = [
        f"model.name={model_dir}",
        "task.name=my_rlvr_ext:parity_task",
        "task.settings={count: 60}",
        'reward.terms=[{kind: "my_rlvr_ext:FirstWordGrader"}]',
        "reward.workers=0",
        "algorithm.surrogate=my_rlvr_ext:cispo",
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
    code = main(["train", "default", *sum((["--set", s] for s in sets), []), "--output-dir", str(run)])
    assert code == 0
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1]
    samples = [json.loads(x) for x in (run / "samples.jsonl").read_text().splitlines()]
    assert samples and all(re.fullmatch(r"Is \d+ even or odd\?", _question(s)) for s in samples)
    # the grader's verdicts: its extracted word is the completion's first word, case folded
    for s in samples:
        words = s["completion"].split()
        assert s["extracted"] == (words[0].strip(".,!").lower() if words else None)
    config = (run / "config.yaml").read_text()
    assert "surrogate: my_rlvr_ext:cispo" in config and "name: my_rlvr_ext:parity_task" in config


def _question(sample) -> str:
    prompt = sample["prompt"]
    return prompt[-1]["content"] if isinstance(prompt, list) else str(prompt).strip().splitlines()[-1]


def test_the_docs_cispo_surrogate_by_hand(ext):
    """CISPO per token: -min(r, 1 + eps_high) A log pi, the weight detached; here r = [0.5, 2.0], eps_high 0.28."""
    logp = torch.tensor([[0.1, -0.2]], dtype=torch.float64, requires_grad=True)
    old = logp.detach() - torch.log(torch.tensor([[0.5, 2.0]], dtype=torch.float64))
    loss, _ = policy_loss(
        logp,
        old,
        torch.tensor([1.0], dtype=torch.float64),
        torch.ones(1, 2, dtype=torch.float64),
        surrogate="my_rlvr_ext:cispo",
        clip_high=0.28,
        agg="token-mean",
    )
    log_r = torch.log(torch.tensor([0.5, 2.0], dtype=torch.float64))
    assert loss.item() == pytest.approx(-(0.5 * log_r[0] + 1.28 * log_r[1]).item() / 2)
    loss.backward()
    assert logp.grad[0].tolist() == pytest.approx([-0.5 / 2, -1.28 / 2])  # the capped weight, not clipped away


@pytest.mark.parametrize(
    "setting, message",
    [
        (
            "task.name=my_rlvr_ext:parity_tsk",
            "task.name='my_rlvr_ext:parity_tsk': module 'my_rlvr_ext' has no attribute",
        ),
        ("algorithm.surrogate=no_such_module:cispo", "algorithm.surrogate='no_such_module:cispo': cannot import"),
        (
            'reward.terms=[{kind: "my_rlvr_ext:Nope"}]',
            "'my_rlvr_ext:Nope': module 'my_rlvr_ext' has no attribute 'Nope'",
        ),
    ],
)
def test_a_misspelled_reference_exits_2_in_one_line_and_writes_nothing(tmp_path, ext, capsys, setting, message):
    run = tmp_path / "run"
    assert main(["train", "default", "--set", setting, "--output-dir", str(run)]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err
    assert not run.exists()


def test_every_registry_has_one_shape_and_lists_its_names(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for what in (
        "task",
        "verifier kind",
        "answer form",
        "sampler backend",
        "tracker",
        "curriculum",
        "advantage scale",
        "loss ratio level",
        "loss surrogate",
        "loss aggregation",
        "algorithm preset",
        "config preset",
        "environment",
        "tool",
        "tool call format",
    ):
        assert isinstance(ALL[what], Registry)
        assert f"{what} ({ALL[what].key}):" in out
    assert "  clip  PPO's clipped surrogate" in out and "  dapo     DAPO: clip-higher 0.28" in out
    assert "  calculator  exact arithmetic on an expression, no code run" in out and "  retry      any task as" in out
    assert "  verifiers  a verifiers environment" in out and "  openenv    an OpenEnv environment" in out
    assert main(["list", "surrogate"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "loss surrogate (algorithm.surrogate):"
    assert main(["list", "nothing-like-this"]) == 2


def test_registry_errors_name_the_key_and_the_choices():
    reg = Registry("widget", key="x.widget", listed=False)
    reg.add("a", 1, "the first")
    reg.add("b", 2)
    assert reg.get("a") == 1 and reg.names() == ("a", "b") and "a" in reg and "c" not in reg
    with pytest.raises(ConfigError, match=r"^x\.widget: unknown widget 'c'; choose from a, b, or package.module:attr$"):
        reg.get("c")
    assert reg.get("json:dumps") is json.dumps  # a plug-in reference imports
    with pytest.raises(ConfigError, match="write package.module:attr"):
        load_attr("json:")
    with pytest.raises(ValueError, match="must not contain ':'"):
        reg.add("a:b", 3)
    assert SURROGATES.get("clip").__name__ == "clipped_surrogate"
