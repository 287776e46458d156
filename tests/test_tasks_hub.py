"""The hub task's dataset is found by the rule a hub model is (rlvr.tasks.hub_access): the hub cache first, then
HF_HUB_OFFLINE, then one request; a dataset the hub cannot give is one line, exit 2, before anything is written
(issue 64: datasets retried for ~25 s and ended in a ConnectionError traceback). A local data file is the jsonl
task's, and the hub task says so."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlvr.config import ConfigError
from rlvr.tasks import load_task
from rlvr.tasks.hub_access import HubUnavailable

ROOT = Path(__file__).resolve().parent.parent


def cache_dataset(root: Path, repo_id: str) -> Path:
    """A hub cache holding `repo_id` as a dataset (refs/main -> an empty snapshot): what a dataset loaded once leaves."""
    repo = root / "hub" / ("datasets--" + repo_id.replace("/", "--"))
    commit = "0" * 40
    (repo / "snapshots" / commit).mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    return root / "hub"


def test_a_dataset_the_cache_lacks_is_one_line_offline(tmp_path, monkeypatch):
    cache = tmp_path / "empty"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(HubUnavailable) as e:
        load_task("hub", dataset="org/no-such-set")
    assert str(e.value) == (
        f"dataset 'org/no-such-set' is not in the hub cache {cache} and HF_HUB_OFFLINE is set; download it where the "
        "hub can be reached, or use a local JSON-lines file (task.name: jsonl), which needs no hub"
    )


def test_a_local_file_is_the_jsonl_tasks_and_a_missing_folder_is_not_sent_to_the_hub(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("train.jsonl").write_text('{"prompt": "1+1?", "answer": "2"}\n')
    with pytest.raises(ConfigError) as e:
        load_task("hub", dataset="train.jsonl")
    assert str(e.value) == (
        "task.settings.dataset: 'train.jsonl' is a file; the hub task reads a hub id or a dataset folder, the jsonl "
        "task a JSON-lines file (task.name: jsonl, task.settings.path: train.jsonl)"
    )
    with pytest.raises(ConfigError, match=r"^task.settings.dataset: 'data/train.jsonl' is no such file; "):
        load_task("hub", dataset="data/train.jsonl")
    with pytest.raises(ConfigError) as e:
        load_task("hub", dataset="./data")
    assert str(e.value) == "task.settings.dataset: './data': no such folder, and not a hub id (org/name)"


def test_an_unreachable_hub_is_asked_once_and_the_run_leaves_nothing(tmp_path):
    """As a new user without network meets it: `rlvr train --from-trl` on a recipe whose dataset_name is a hub id,
    no HF_HUB_OFFLINE, a hub that refuses connections (127.0.0.1:9)."""
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("dataset_name: org/no-such-set\nmax_steps: 2\n")
    out = tmp_path / "run"
    env = {**os.environ, "HF_ENDPOINT": "http://127.0.0.1:9", "HF_HUB_CACHE": str(tmp_path / "cache")}
    env["PYTHONPATH"] = str(ROOT / "src")
    env.pop("HF_HUB_OFFLINE", None)
    proc = subprocess.run(
        [sys.executable, "-m", "rlvr", "train", "--from-trl", str(recipe), "--output-dir", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    last = proc.stderr.splitlines()[-1]  # after the conversion's report
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert last.startswith(
        "rlvr train: dataset 'org/no-such-set': the hub cannot be reached (ConnectError: "
    ) and last.endswith(
        f"and it is not in the hub cache {tmp_path / 'cache'} either (HF_HUB_CACHE moves the cache, HF_HUB_OFFLINE=1 "
        "skips the hub); a local JSON-lines file (task.name: jsonl), which needs no hub"
    )
    assert not out.exists()
