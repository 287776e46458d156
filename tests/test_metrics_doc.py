"""docs/metrics.md lists every key a step's metrics line can hold, and only those: four tiny runs (single-turn with
validation, a KL term and a rollout correction; one tool-use episode step; two steps sampled ahead; two with a
distillation teacher) write their
lines, and each key they hold must match a row of the table, each row must match a key they hold, and a row said to
come "every step" must be in every line. A key added to, renamed in or dropped from the code without the table fails here."""

import json
import re
from pathlib import Path

import pytest

from conftest import make_tiny_llama, save_tiny_model
from test_trainer import tiny_config
from test_training_episodes import episode_config

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "metrics.md"


def documented() -> dict[str, dict]:
    """Key (as written, `<name>` marking a family) -> {"pattern": compiled regex, "when": its column}."""
    rows = {}
    for line in DOC.read_text().splitlines():
        if not line.startswith("| `"):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert len(cells) == 5, f"docs/metrics.md: a table row needs 5 cells (key, meaning, unit, when, module): {line}"
        key = cells[0].strip("`")
        assert key not in rows, f"docs/metrics.md lists {key} twice"
        # a family name such as <term> or <band> stands for one path segment
        rows[key] = {"pattern": re.compile(re.sub(r"<[a-z]+>", "[^/]+", re.escape(key))), "when": cells[3]}
    return rows


def undocumented(keys, table: dict[str, dict]) -> list[str]:
    return sorted(k for k in keys if not any(row["pattern"].fullmatch(k) for row in table.values()))


def test_a_family_matches_one_segment_and_a_plain_key_only_itself():
    table = {k: v for k, v in documented().items() if k in ("reward/mean", "reward/<term>/mean", "band/<band>/share")}
    keys = ["reward/mean", "reward/first_char/mean", "band/d10/share", "reward/a/b/mean", "reward/means", "band//share"]
    assert undocumented(keys, table) == ["band//share", "reward/a/b/mean", "reward/means"]


def read_lines(run: Path) -> list[dict]:
    return [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def lines(tmp_path_factory, tokenizer) -> dict[str, list[dict]]:
    """The metrics lines of two tiny runs (seconds each): between them every conditional key shows."""
    from rlvr.training.loop import train

    single = tiny_config(
        tmp_path_factory.mktemp("single"),
        **{
            "algorithm": "{preset: grpo, beta: 0.04, rollout_correction: truncated}",  # kl, correction/*
            "log.eval_every": 1,  # val/*
            "log.eval_problems": 2,
            "log.checkpoint_every": 0,
            "model.save_merged": "false",
        },
    )
    episodes = episode_config(
        tmp_path_factory.mktemp("episodes"),
        **{"episode.environment": "tool", "episode.tools": "[calculator]", "episode.max_turns": 2, "train.steps": 1},
    )
    ahead = tiny_config(  # async/*, time/wait_*
        tmp_path_factory.mktemp("ahead"),
        **{"rollout.max_staleness": 1, "log.checkpoint_every": 0, "model.save_merged": "false"},
    )
    tiny = save_tiny_model(tokenizer, tmp_path_factory.mktemp("tiny-model"))
    distill = tiny_config(  # distill/*, time/teacher
        tmp_path_factory.mktemp("distill"),
        **{"model.name": str(tiny), "distill.teacher": str(tiny), "distill.coef": 0.5, "log.checkpoint_every": 0},
    )
    out = {}
    runs = (("single-turn", single), ("episodes", episodes), ("sampled-ahead", ahead), ("distillation", distill))
    for name, cfg in runs:
        out[name] = read_lines(train(cfg, policy=(make_tiny_llama(len(tokenizer)), tokenizer), quiet=True))
    assert [len(v) for v in out.values()] == [2, 1, 2, 2]
    return out


def test_every_key_a_step_writes_is_in_the_table(lines):
    table = documented()
    for name, rows in lines.items():
        missing = undocumented(set().union(*rows), table)
        assert missing == [], f"{name}: keys not in docs/metrics.md: {missing}"


def test_every_key_in_the_table_is_written_by_a_tiny_run(lines):
    written = set().union(*(row for rows in lines.values() for row in rows))
    unseen = [key for key, row in documented().items() if not any(row["pattern"].fullmatch(k) for k in written)]
    assert unseen == [], f"docs/metrics.md lists keys no step wrote: {unseen}"


def test_keys_said_to_come_every_step_are_in_every_line(lines):
    every = {k: row for k, row in documented().items() if row["when"].startswith("every step")}
    assert {"reward/mean", "verdict/<status>_frac", "skipped", "lr", "time/step", "band/<band>/share"} <= set(every)
    for name, rows in lines.items():
        for row in rows:
            absent = [k for k, d in every.items() if not any(d["pattern"].fullmatch(key) for key in row)]
            assert absent == [], f"{name} step {row['step']}: no {absent}"


def test_the_readme_links_the_table():
    assert "docs/metrics.md" in (ROOT / "README.md").read_text()
