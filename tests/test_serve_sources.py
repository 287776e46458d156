"""What `rlvr serve` grades with: a jsonl task from its settings (--set task.settings.*), a config file (--config) and a
run directory (--run) each grade exactly as the run does, the same reward for the same completion as `rlvr verify` on
the same file; the first scorer given is what items naming none get; a missing setting is one line, exit 2. Real
services on 127.0.0.1 (tests/serve_util.py)."""

import json
import subprocess

import pytest

from rlvr.cli import main
from rlvr.config import dump, resolve
from rlvr.training.step import check_components
from serve_util import RLVR, Service

# gold 5 throughout; the number form (the task's answer_form) refuses the unevaluated 8-3 that the math form would pay
COMPLETIONS = [
    ("so it is \\boxed{5}", 1.1),  # correct and boxed: the format term pays its 0.1 on top
    ("\\boxed{6}", 0.1),  # wrong, still boxed
    ("five, no box", 0.0),
    ("\\boxed{5} or \\boxed{6}", 0.0),
    ("\\boxed{8-3}", 0.1),
    ("\\boxed{5.0}", 1.1),
]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """data.jsonl (the task's problems), completions.jsonl (what is graded), the config that trains on the data, and
    the verify run's rewards for the completions (`rlvr verify --task jsonl` with the same settings)."""
    d = tmp_path_factory.mktemp("sources")
    data = d / "data.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"{i} + 5 - {i}?", "answer": "5"}) + "\n" for i in range(12)))
    comp = d / "completions.jsonl"
    comp.write_text("".join(json.dumps({"completion": c, "answer": "5"}) + "\n" for c, _ in COMPLETIONS))
    config = d / "my-data.yaml"
    config.write_text(f"task:\n  name: jsonl\n  settings: {{path: {data}, answer_form: number}}\n")
    sets = ["--set", f"task.settings.path={data}", "--set", "task.settings.answer_form=number"]
    args = ["verify", "--task", "jsonl", *sets, "--input", str(comp), "--output", str(d / "out.jsonl")]
    assert main([*args, "--workers", "0"]) == 0
    verified = [json.loads(line)["reward"] for line in (d / "out.jsonl").read_text().splitlines()]
    assert verified == [r for _, r in COMPLETIONS]
    return {"dir": d, "data": data, "config": config, "sets": sets, "verified": verified}


def served_rewards(service: Service, task: str | None = None) -> list[float]:
    items = [{"id": i, "completion": c, "answer": "5"} for i, (c, _) in enumerate(COMPLETIONS)]
    status, body, _ = service.post("/v1/verify", {"items": items, **({"task": task} if task else {})})
    assert status == 200, body
    return [v["reward"] for v in body["verdicts"]]


def test_a_jsonl_task_from_its_settings_grades_as_rlvr_verify(files):
    with Service("--task", "jsonl", *files["sets"], "--workers", "0") as s:
        assert served_rewards(s) == files["verified"] == [1.1, 0.1, 0.0, 0.0, 0.1, 1.1]
        status, body, _ = s.post("/get_reward", {"query": ["Q: \\boxed{5}"], "prompts": ["Q:"], "labels": ["5"]})
        assert (status, body["rewards"]) == (200, [1.1])


def test_a_config_file_grades_as_rlvr_verify(files):
    with Service("--config", str(files["config"]), "--workers", "0") as s:
        assert served_rewards(s, task="jsonl") == files["verified"]
        assert s.get("/healthz")[1]["scorers"] == ["task:jsonl"]


def test_a_run_directory_grades_with_the_reward_it_trained_on(files):
    """The run's config.yaml as training writes it (check_components' resolved config), with a reward section of
    its own: the format term at weight 0.05. Served, each completion gets the reward the run's own Reward gives."""
    custom = files["dir"] / "custom.yaml"
    custom.write_text(
        files["config"].read_text() + "reward:\n  terms: [{name: correct, kind: math}, "
        "{name: format, kind: boxed_format, weight: 0.05}]\n"
    )
    parts = check_components(resolve(str(custom)))
    run = files["dir"] / "runs" / "x"
    run.mkdir(parents=True)
    (run / "config.yaml").write_text(dump(parts.resolved.to_dict()))
    texts = [c for c, _ in COMPLETIONS]
    trained = parts.reward(texts, parts.task.problems("train")[:1] * len(texts)).total
    with Service("--run", str(run), "--workers", "0") as s:
        assert served_rewards(s) == trained == [1.05, 0.05, 0.0, 0.0, 0.05, 1.05]


def test_the_first_scorer_given_is_the_default():
    """Documented: items naming no scorer get the first given. --verifier math first pays 1.0 for a right boxed
    answer (one term); the arithmetic task, named, adds its format term (1.1)."""
    with Service("--verifier", "math", "--task", "arithmetic", "--workers", "0") as s:
        item = {"completion": "\\boxed{12}", "answer": "12"}
        status, body, _ = s.post("/v1/verify", {"items": [item, {**item, "task": "arithmetic"}]})
        assert (status, [v["reward"] for v in body["verdicts"]]) == (200, [1.0, 1.1])
        assert s.post("/get_reward", {"query": ["\\boxed{12}"], "labels": ["12"]})[1]["rewards"] == [1.0]
        assert s.get("/healthz")[1]["scorers"] == ["verifier:math", "task:arithmetic"]


def _refused(*args):
    proc = subprocess.run([RLVR, "serve", "--port", "0", *args], capture_output=True, text=True, timeout=120)
    return proc.returncode, proc.stderr.strip()


def test_start_up_mistakes_of_sources_exit_2_in_one_line(files, tmp_path):
    no_path = tmp_path / "no-path.yaml"
    no_path.write_text("task: {name: jsonl}\n")
    give = "jsonl task: give `path` (split by id) or `splits` {train: ..., heldout: ...}"
    cases = [
        (
            ("--task", "jsonl"),
            f"--task jsonl: {give}; give it as --set task.settings.KEY=VALUE, or serve a run's grading with "
            f"--config FILE / --run DIR",
        ),
        ((("--config", str(no_path))), f"--config {no_path}: task: {give}"),
        (("--run", str(tmp_path)), f"--run {tmp_path}: not a run directory (no config.yaml there)"),
        (
            ("--config", str(files["config"]), *files["sets"]),
            "--set task.settings.path: applies to --task NAME, and none is given (a --config or --run carries its "
            "own task settings)",
        ),
        (
            ("--task", "arithmetic", "--set", "hedging=strict"),
            "--set hedging: a setting of the --verifier kinds, and none is given (a task's settings are --set "
            "task.settings.KEY=VALUE)",
        ),
        (
            ("--task", "jsonl", *files["sets"], "--config", str(files["config"])),
            f"--config {files['config']}: serves task:jsonl, as --task jsonl already does; one scorer per name "
            f"here (serve the other on another port)",
        ),
    ]
    for args, message in cases:
        assert _refused(*args) == (2, f"rlvr serve: {message}")
