"""Experiment trackers (log.report_to): what TensorBoard, MLflow, trackio and W&B hold after a run, read back with each
library's own reader (TensorBoard's EventAccumulator, the MLflow client on the file store, trackio's local store,
W&B's offline run file with W&B's own record type) and compared with metrics.jsonl and samples.jsonl step for step,
including after a SIGKILL and --resume; faults (missing extra, unwritable folder, a tracker failing mid-run)."""

import atexit
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import pytest

import fault_entry
from conftest import make_tiny_llama
from rlvr.cli import main
from rlvr.config import Config, ConfigError, as_config, dump, resolve
from rlvr.rundir.trackers import TRACKERS, Resume, Trackers, TrackerWarning, read_state
from rlvr.training.loop import train
from test_trainer import tiny_config

# trackio fixes its store when first imported: a folder of this test session's own, set before any import of it
os.environ["TRACKIO_DIR"] = tempfile.mkdtemp(prefix="rlvr-test-trackio-")
atexit.register(shutil.rmtree, os.environ["TRACKIO_DIR"], True)
ROOT = Path(__file__).resolve().parents[1]
ALL = ["tensorboard", "mlflow", "trackio", "wandb"]


def need(*modules):
    for m in modules:
        pytest.importorskip(m, reason=f'{m} is not installed (pip install "rlvr[trackers]")')


@pytest.fixture(autouse=True)
def offline_env(monkeypatch, tmp_path_factory):
    """W&B offline with its caches in a temporary folder; MLflow's default store (the run's mlruns/)."""
    cache = tmp_path_factory.mktemp("wandb-home")
    monkeypatch.setenv("WANDB_MODE", "offline")
    for var in ("WANDB_DIR", "MLFLOW_TRACKING_URI"):
        monkeypatch.delenv(var, raising=False)
    for var in ("WANDB_CACHE_DIR", "WANDB_CONFIG_DIR", "WANDB_DATA_DIR", "WANDB_ARTIFACT_DIR"):
        monkeypatch.setenv(var, str(cache / var.lower()))
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")


def jsonl(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def expected(run):
    """{metric: [(step, value)]} of every numeric key of metrics.jsonl but the step and its wall time (the trackers'
    time axis, not a metric), and samples by step."""
    rows = jsonl(run / "metrics.jsonl")
    keys = sorted(
        {k for r in rows for k, v in r.items() if k not in ("step", "time/wall") and isinstance(v, (int, float))}
    )
    series = {k: [(r["step"], float(r[k])) for r in rows if isinstance(r.get(k), (int, float))] for k in keys}
    samples: dict[int, list] = {}
    for s in jsonl(run / "samples.jsonl") if (run / "samples.jsonl").exists() else []:
        samples.setdefault(s["step"], []).append(s)
    return series, samples


def same_series(got: dict, want: dict, rel=1e-6):
    assert sorted(got) == sorted(want)
    for key, points in want.items():
        assert [s for s, _ in got[key]] == [s for s, _ in points], key  # each step once, in order
        assert [v for _, v in got[key]] == pytest.approx([v for _, v in points], rel=rel, abs=1e-9), key


# ---------------------------------------------------------------------------------------------------------------
# readers: each library's own


def read_tensorboard(run):
    """({tag: [(step, value)]}, {text tag: {step: text}}, {image tag: [step]}) through TensorBoard's EventAccumulator."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    ea = EventAccumulator(str(run / "tensorboard"), size_guidance={"scalars": 0, "tensors": 0, "images": 0})
    ea.Reload()
    tags = ea.Tags()
    scalars = {t: [(e.step, e.value) for e in ea.Scalars(t)] for t in tags["scalars"]}
    texts = {
        t.removesuffix("/text_summary"): {e.step: e.tensor_proto.string_val[0].decode() for e in ea.Tensors(t)}
        for t in tags["tensors"]
        if t.endswith("/text_summary")
    }
    images = {t: [e.step for e in ea.Images(t)] for t in tags["images"]}
    return scalars, texts, images


def mlflow_client(run):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=(run / "mlruns").absolute().as_uri())


def read_mlflow(run, project="rlvr"):
    """(the one active run, {metric: [(step, value)]}, {artifact path: parsed JSON}) through MlflowClient."""
    client = mlflow_client(run)
    exp = client.get_experiment_by_name(project)
    runs = client.search_runs([exp.experiment_id])  # active runs only: deleted ones are not shown
    assert len(runs) == 1, [r.info.run_name for r in runs]
    info = runs[0]
    series = {
        k: sorted((m.step, m.value) for m in client.get_metric_history(info.info.run_id, k)) for k in info.data.metrics
    }
    out = Path(tempfile.mkdtemp())
    artifacts = {}
    for top in client.list_artifacts(info.info.run_id):
        for item in client.list_artifacts(info.info.run_id, top.path) if top.is_dir else [top]:
            local = client.download_artifacts(info.info.run_id, item.path, str(out))
            artifacts[item.path] = json.loads(Path(local).read_text()) if item.path.endswith(".json") else local
    return info, series, artifacts


def read_trackio(project, run_id):
    """({metric: [(step, value)]}, {step: table rows}, config) from trackio's local store."""
    from trackio.sqlite_storage import SQLiteStorage

    logs = SQLiteStorage.get_logs(project, run_id=run_id)
    series, tables = {}, {}
    for entry in logs:
        for k, v in entry.items():
            if k in ("step", "timestamp"):
                continue
            if isinstance(v, dict) and v.get("_type") == "trackio.table":
                tables.setdefault(k, {})[entry["step"]] = v["_value"]
            elif isinstance(v, (int, float)):
                series.setdefault(k, []).append((entry["step"], float(v)))
    return {k: sorted(v) for k, v in series.items()}, tables, SQLiteStorage.get_run_config(project, run_id=run_id)


def wandb_records(path: Path):
    """The records of a .wandb file: W&B's LevelDB-style log (a ':W&B' header, 32 KiB blocks of CRC'd chunks)
    holding W&B's own protobuf Record messages."""
    from wandb.proto import wandb_internal_pb2 as pb

    data, block, pos, parts = path.read_bytes(), 32768, 7, b""
    assert data[:4] == b":W&B"
    while pos + 7 <= len(data):
        if block - pos % block < 7:
            pos += block - pos % block
            continue
        _crc, size, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if size == 0 and kind == 0:
            pos += block - pos % block
            continue
        payload, pos = data[pos + 7 : pos + 7 + size], pos + 7 + size
        parts = payload if kind in (1, 2) else parts + payload
        if kind in (1, 4):
            record = pb.Record()
            record.ParseFromString(parts)
            yield record


def finished_records(segment: Path, timeout: float = 60.0) -> list:
    """A finished offline segment's records. W&B's service writes them after run.finish() returns (within about a
    second): wait for the run's exit record, reading again when a read caught a record half written (CI saw it)."""
    from google.protobuf.message import DecodeError

    deadline = time.monotonic() + timeout
    while True:
        try:
            records = list(wandb_records(next(segment.glob("*.wandb"))))
        except DecodeError:  # read while the service was mid-write: its last record is not whole yet
            if time.monotonic() > deadline:
                raise
            records = []
        if any(r.WhichOneof("record_type") == "exit" for r in records) or time.monotonic() > deadline:
            return records
        time.sleep(0.2)


def read_wandb(run):
    """W&B's history as a synced run would hold it: the offline segments in order, a step that is not past the last
    one dropped (W&B's rule). ({metric: [(step, value)]}, {media key: [(step, type)]}, config, segments)."""
    segments = sorted((run / "wandb").glob("offline-run-*"))
    series, media, config, last = {}, {}, {}, -1
    for seg in segments:
        for record in finished_records(seg):
            kind = record.WhichOneof("record_type")
            if kind in ("run", "config"):  # the config given to wandb.init, then later updates
                updates = record.run.config.update if kind == "run" else record.config.update
                config.update({i.key: json.loads(i.value_json) for i in updates})
            if kind != "history" or record.history.step.num <= last:
                continue
            last = step = record.history.step.num
            items = {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in record.history.item}
            files = {k[: -len("/_type")]: v for k, v in items.items() if k.endswith("/_type")}
            for name, kind_ in files.items():
                media.setdefault(name, []).append((step, kind_))
            for k, v in items.items():
                if (
                    not k.startswith("_")
                    and not any(k.startswith(f + "/") for f in files)
                    and isinstance(v, (int, float))
                ):
                    series.setdefault(k, []).append((step, float(v)))
    return series, media, config, segments


def check_tensorboard(run, project=None):
    want, samples = expected(run)
    scalars, texts, _ = read_tensorboard(run)
    same_series(scalars, want)  # the tags are metrics.jsonl's numeric keys, one value per step
    assert sorted(texts["samples"]) == sorted(samples)
    for step, rows in samples.items():
        text = texts["samples"][step]
        assert text.count("\n") == len(rows) + 1  # header, rule, one line per sample
        for r in rows:
            assert f"| {r['status']} | {r['reward']:.4g} |" in text and r["problem_id"] in text
    assert "rollout:" in texts["config"][0]


def check_mlflow(run, project="rlvr"):
    want, samples = expected(run)
    info, series, artifacts = read_mlflow(run, project)
    same_series(series, want, rel=1e-12)
    assert info.info.run_name == (read_config(run)["log"]["run_name"] or run.name)
    assert info.data.params["train.lr"] == str(read_config(run)["train"]["lr"])
    for step, rows in samples.items():
        table = artifacts[f"samples/step-{step:06d}.json"]
        got = [dict(zip(table["columns"], row)) for row in table["data"]]
        assert got == [{k: r[k] for k in table["columns"]} for r in rows]
    assert len([a for a in artifacts if a.startswith("samples/")]) == len(samples)


def check_trackio(run, project="rlvr"):
    want, samples = expected(run)
    state = read_state(run)["trackio"]
    series, tables, config = read_trackio(project, state["id"])
    same_series(series, want, rel=1e-12)
    assert sorted(tables["samples"]) == sorted(samples)
    for step, rows in samples.items():
        assert tables["samples"][step] == [{k: r.get(k) for k in tables["samples"][step][0]} for r in rows]
    assert config["train"]["lr"] == read_config(run)["train"]["lr"]


def check_wandb(run, project=None):
    want, samples = expected(run)
    series, media, config, _ = read_wandb(run)
    same_series(series, want, rel=1e-12)
    assert [s for s, kind in media["samples"]] == sorted(samples) and {k for _, k in media["samples"]} == {"table-file"}
    assert config["train"]["lr"] == read_config(run)["train"]["lr"]


CHECKS = {"tensorboard": check_tensorboard, "mlflow": check_mlflow, "trackio": check_trackio, "wandb": check_wandb}


def read_config(run):
    import yaml

    return yaml.safe_load((run / "config.yaml").read_text())


def cli_sets(tmp_path, model_dir, **over):
    cfg = tiny_config(tmp_path, **{"model.name": str(model_dir), "train.steps": 3, **over})
    return [f"{k}={json.dumps(v)}" for k, v in flat_sets(cfg)]


def cli_train(tmp_path, model_dir, *extra):
    """`rlvr train --set ... --output-dir R` with the tiny config (3 steps), plus `extra` settings."""
    sets = cli_sets(tmp_path, model_dir)
    return main(["train", *sum((["--set", s] for s in [*sets, *extra]), []), "--output-dir", str(tmp_path / "R")])


def flat_sets(cfg, prefix=""):
    open_keys = {"task.settings", "reward.terms", "algorithm", "curriculum", "model.lora.target_modules"}
    for k, v in cfg.items():
        if isinstance(v, dict) and f"{prefix}{k}" not in open_keys:
            yield from flat_sets(v, f"{prefix}{k}.")
        else:
            yield f"{prefix}{k}", v


# ---------------------------------------------------------------------------------------------------------------
# a run, live


def test_rlvr_train_reports_to_tensorboard_and_mlflow(tmp_path, model_dir, capsys):
    """`rlvr train --set 'log.report_to=[tensorboard, mlflow]'`: R/tensorboard has one scalar tag per numeric key of
    R/metrics.jsonl with one value per step, R/mlruns the same metrics; both have the samples and the config."""
    need("tensorboard", "mlflow")
    run = tmp_path / "R"
    assert cli_train(tmp_path, model_dir, "log.report_to=[tensorboard, mlflow]") == 0, capsys.readouterr().err
    assert [r["step"] for r in jsonl(run / "metrics.jsonl")] == [0, 1, 2]
    check_tensorboard(run)
    check_mlflow(run)
    assert set(read_state(run)) == {"tensorboard", "mlflow"}


def test_train_reports_to_trackio_and_wandb(tmp_path, tokenizer):
    need("trackio", "wandb")
    project = f"rlvr-{tmp_path.name}"
    cfg = tiny_config(
        tmp_path,
        **{"train.steps": 3, "log.samples_every": 2, "log.report_to": "[trackio, wandb]", "log.project": project},
    )
    run = train(cfg, policy=(make_tiny_llama(len(tokenizer)), tokenizer), quiet=True)
    assert sorted(expected(run)[1]) == [0, 2]
    check_trackio(run, project)
    check_wandb(run)
    (segment,) = read_wandb(run)[3]
    records = finished_records(segment)
    meta = next(r.run for r in records if r.WhichOneof("record_type") == "run")
    assert (meta.project, meta.display_name, meta.run_id) == (project, "run", read_state(run)["wandb"]["id"])


# ---------------------------------------------------------------------------------------------------------------
# killed, then resumed: each step once, with the values metrics.jsonl ends with


@pytest.fixture
def faulty_kind():
    """tests/fault_entry.py's reward kind, which sends this process a signal at a chosen completion."""
    from rlvr.verifiers.registry import KINDS

    fault_entry.register()
    yield
    KINDS.remove(fault_entry.KIND)


def test_sigkill_then_resume_shows_each_step_once_in_every_tracker(tmp_path, model_dir, faulty_kind):
    need("tensorboard", "mlflow", "trackio", "wandb")
    project = f"rlvr-{tmp_path.name}"
    cfg = tiny_config(
        tmp_path,
        **{
            "model.name": str(model_dir),
            "train.steps": 4,
            "log.checkpoint_every": 2,
            "log.report_to": json.dumps(ALL),
            "log.project": project,
        },
    )
    cfg["reward"]["terms"][0]["kind"] = fault_entry.KIND
    cfg["task"]["settings"]["demo"] = "none"  # the kill counts scored completions: no measurement before step 0
    cfg_file = tmp_path / "config.yaml"
    cfg_file.write_text(dump(cfg))
    run = Path(cfg["output_dir"])
    # killed in the middle of step 3 (its 4th completion; 8 a step): steps 0-2 logged, the newest checkpoint after step 1
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "RLVR_TEST_SIGNAL": f"KILL@{3 * 8 + 3}"}
    env.pop(
        "WANDB_SERVICE", None
    )  # its own W&B service, as a run started from a shell has (this process may share one)
    p = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "fault_entry.py"), "train", str(cfg_file)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == -9, p.stderr[-3000:]
    assert [r["step"] for r in jsonl(run / "metrics.jsonl")] == [0, 1, 2]
    before = jsonl(run / "metrics.jsonl")[2]
    first_ids = read_state(run)
    train(cfg, resume=True, quiet=True)  # redoes steps 2 and 3
    after = jsonl(run / "metrics.jsonl")
    assert [r["step"] for r in after] == [0, 1, 2, 3] and after[2]["time/step"] != before["time/step"]
    for name in ALL:  # each step once, with the redone step's values (its timings differ from the killed run's)
        CHECKS[name](run, project)
    from trackio.sqlite_storage import SQLiteStorage

    assert [r["id"] for r in SQLiteStorage.get_run_records(project)] == [read_state(run)["trackio"]["id"]]
    assert read_state(run)["trackio"]["id"] != first_ids["trackio"]["id"]
    assert len(read_wandb(run)[3]) == 1 and read_state(run)["wandb"]["id"] == first_ids["wandb"]["id"]
    deleted = mlflow_client(run).get_run(first_ids["mlflow"]["run_id"])
    assert deleted.info.lifecycle_stage == "deleted"


# ---------------------------------------------------------------------------------------------------------------
# a run directory made by hand: export, W&B's resume of a synced run


def fake_run(path: Path, steps: int = 4, run_name: str = "") -> Path:
    """metrics.jsonl, samples.jsonl (every other step; cells with '|' and newlines) and config.yaml, as a run leaves them."""
    path.mkdir(parents=True)
    rows = [
        {
            "step": s,
            "reward/mean": 0.1 * s,
            "verdict/correct_frac": 0.25 + 0.1 * s,
            "band/easy/share": 0.5,
            "entropy": None if s == 1 else 1.0 / (s + 1),
            "time/step": 2.0 + s,
            "lr": 1e-5,
        }
        for s in range(steps)
    ]
    samples = [
        {
            "step": s,
            "problem_id": f"p{s}-{i}",
            "band": "easy",
            "prompt": f"What is {s}+{i}?",
            "gold": str(s + i),
            "completion": f"It is | {s + i}\nso \\boxed{{{s + i}}}",
            "extracted": str(s + i),
            "status": ["correct", "wrong"][i % 2],
            "reward": float(i % 2 == 0),
        }
        for s in range(0, steps, 2)
        for i in range(3)
    ]
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (path / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in samples))
    (path / "config.yaml").write_text(dump(resolve(None, [f"output_dir={path}", f"log.run_name={run_name}"])))
    return path


@pytest.mark.parametrize("name", ALL)
def test_export_replays_a_run_and_a_second_export_replaces_the_first(tmp_path, name, capsys):
    need(TRACKERS[name].module)
    run = fake_run(tmp_path / "old-run")
    project = f"rlvr-{tmp_path.name}" if name == "trackio" else "rlvr"
    for _ in range(2):
        assert main(["export", str(run), "--to", name, "--project", project]) == 0, capsys.readouterr().err
        assert "exported 4 steps and 6 samples" in capsys.readouterr().out
        CHECKS[name](run, project)
    if name == "wandb":
        assert len(read_wandb(run)[3]) == 1


def exported_times(run: Path, name: str) -> dict[int, float]:
    """{step: the wall time (Unix seconds) the tracker holds for reward/mean at that step}, read back from its files;
    and no tracker has time/wall as a metric of its own."""
    if name == "tensorboard":
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

        ea = EventAccumulator(str(run / "tensorboard"), size_guidance={"scalars": 0})
        ea.Reload()
        assert "time/wall" not in ea.Tags()["scalars"]
        return {e.step: e.wall_time for e in ea.Scalars("reward/mean")}
    if name == "mlflow":
        info = read_mlflow(run)[0]
        assert "time/wall" not in info.data.metrics
        history = mlflow_client(run).get_metric_history(info.info.run_id, "reward/mean")
        return {m.step: m.timestamp / 1000 for m in history}
    assert "time/wall" not in read_wandb(run)[0]
    out = {}
    for record in finished_records(next((run / "wandb").glob("offline-run-*"))):
        if record.WhichOneof("record_type") == "history":
            items = {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in record.history.item}
            out[record.history.step.num] = items["_timestamp"]
    return out


def test_export_takes_the_tracker_registry_s_names_or_a_plugin(tmp_path, capsys):
    """--to has no list of its own: a wrong name is one line naming the registry's choices (exit 2), and a tracker
    given as package.module:attr is exported to as log.report_to's would be."""
    need(TRACKERS["tensorboard"].module)
    run = fake_run(tmp_path / "old-run")
    assert main(["export", str(run), "--to", "tensorbord"]) == 2
    assert capsys.readouterr().err == (
        "rlvr export: --to: unknown tracker 'tensorbord'; choose from tensorboard, mlflow, trackio, wandb, or "
        "package.module:attr\n"
    )
    plugin = "rlvr.rundir.trackers.to_tensorboard:TensorBoardTracker"
    assert main(["export", str(run), "--to", plugin]) == 0, capsys.readouterr().err
    assert sorted(exported_times(run, "tensorboard")) == [0, 1, 2, 3]


@pytest.mark.parametrize("name", ["tensorboard", "mlflow", "wandb"])
def test_export_puts_each_step_at_the_time_its_line_was_written(tmp_path, name, capsys):
    """A tracker's time axis after `rlvr export` is the run's own: each point at its line's time/wall (here an hour
    a step, in November 2023), not the export's; a line from before rlvr recorded time/wall gets the export's time,
    as every line did before. trackio's log takes no time (its lines carry the export's)."""
    need(TRACKERS[name].module)
    run = fake_run(tmp_path / "old-run")
    rows = jsonl(run / "metrics.jsonl")
    written = [1_700_000_000.25 + 3600 * s for s in range(3)]
    for row, t in zip(rows, written):
        row["time/wall"] = t
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))  # step 3 has none
    before = time.time()
    assert main(["export", str(run), "--to", name]) == 0, capsys.readouterr().err
    got = exported_times(run, name)
    assert sorted(got) == [0, 1, 2, 3]
    assert [got[s] for s in (0, 1, 2)] == pytest.approx(written, abs=1e-3)
    assert before - 1 <= got[3] <= time.time() + 1


def fake_main_job(root: Path) -> dict:
    """A main job's folder as `rlvr run` leaves it (its RLVR run by hand, real summaries, comparison and plots);
    returns the comparison."""
    from rlvr.evaluation.compare import compare, write_comparison
    from rlvr.evaluation.records import EvalRecord
    from rlvr.evaluation.report import training_plot
    from rlvr.evaluation.summary import summarize, write_summary

    run = root / "rlvr" if (root / "rlvr").exists() else fake_run(root / "rlvr")
    evals = {
        m: [
            EvalRecord(f"q{i}", ["easy", "hard"][i % 2], j, "correct" if (i + j + k) % 3 else "wrong", 1.0, "1", "c")
            for i in range(6)
            for j in range(2)
        ]
        for k, m in enumerate(["start", "rlvr"])
    }
    for m, records in evals.items():
        write_summary(summarize(records, ks=[1, 2], label=m), root / "eval" / m, "summary")
    result = compare(evals, baseline="start")
    write_comparison(result, root, "compare")
    training_plot(jsonl(run / "metrics.jsonl"), root / "plots" / "training.png")
    return result


def test_export_of_a_main_job_adds_the_heldout_tables_and_plots(tmp_path, capsys):
    need("tensorboard", "mlflow")
    root = tmp_path / "main"
    result = fake_main_job(root)
    run = root / "rlvr"
    for name in ("tensorboard", "mlflow"):
        assert main(["export", str(root), "--to", name]) == 0, capsys.readouterr().err
    scalars, texts, images = read_tensorboard(run)
    assert images == {"plots/training": [4], "plots/compare": [4]}
    heldout = texts["heldout/summary"][4]
    assert heldout.count("\n") == 1 + 2 * 3 and "| rlvr | all |" in heldout  # 2 models x (2 bands + all)
    assert "| rlvr | hard | start | pass@1 |" in texts["heldout/compare"][4]
    assert scalars["heldout/rlvr/pass_at_1"] == [(4, pytest.approx(result["accuracy"]["rlvr"]["all"]["value"]))]
    info, series, artifacts = read_mlflow(run)
    assert info.info.run_name == "main"  # a main job's run is named after its root
    assert series["heldout/start/pass_at_1"] == [(4, pytest.approx(result["accuracy"]["start"]["all"]["value"]))]
    table = artifacts["heldout/summary.json"]
    rows = [dict(zip(table["columns"], r)) for r in table["data"]]
    rlvr_all = next(r for r in rows if r["model"] == "rlvr" and r["band"] == "all")
    assert rlvr_all["pass@1"] == pytest.approx(result["accuracy"]["rlvr"]["all"]["value"])
    assert {"plots/training.png", "plots/compare.png"} <= set(artifacts)


def test_the_main_job_adds_its_heldout_results_to_the_training_run_in_every_tracker(tmp_path):
    """report_to_trackers (the main job's last phase) reopens the RLVR run each tracker holds and adds to it."""
    need("tensorboard", "mlflow", "trackio", "wandb")
    from rlvr.training.main_folder import rl_phase_cfg
    from rlvr.training.main_job import report_to_trackers

    root, project = tmp_path / "main", f"rlvr-{tmp_path.name}"
    run = fake_run(root / "rlvr", run_name="main")
    rows = jsonl(run / "metrics.jsonl")
    live = Trackers.open(ALL, run, project=project, run_name="main", config=read_config(run))
    for row in rows:
        live.log_step(row)
    live.finish()
    result = fake_main_job(root)
    report_to_trackers(
        rl_phase_cfg(
            as_config(
                resolve(None, [f"output_dir={root}", f"log.report_to={json.dumps(ALL)}", f"log.project={project}"])
            ),
            root,
        ),
        root,
    )
    overall = result["accuracy"]["rlvr"]["all"]["value"]
    assert read_tensorboard(run)[0]["heldout/rlvr/pass_at_1"] == [(4, pytest.approx(overall))]
    info, series, artifacts = read_mlflow(run, project)
    assert info.info.run_id == read_state(run)["mlflow"]["run_id"] and len(series["reward/mean"]) == 4
    assert series["heldout/rlvr/pass_at_1"] == [(4, overall)] and "plots/compare.png" in artifacts
    series, tables, _ = read_trackio(project, read_state(run)["trackio"]["id"])
    assert series["heldout/rlvr/pass_at_1"] == [(4, overall)] and set(tables) == {"heldout/summary", "heldout/compare"}
    series, media, _, segments = read_wandb(run)
    assert len(segments) == 2 and len(series["reward/mean"]) == 4 and series["heldout/rlvr/pass_at_1"] == [(4, overall)]
    assert media["plots/training"] == [(4, "image-file")] and media["heldout/summary"] == [(4, "table-file")]


def test_wandb_resume_of_a_synced_run_sends_only_the_steps_it_lacks(tmp_path):
    """Once a segment was synced, W&B's history cannot be cut: the same run is resumed and the steps it holds
    are not sent again (W&B would ignore them)."""
    need("wandb")
    run = fake_run(tmp_path / "run")
    rows, samples = jsonl(run / "metrics.jsonl"), jsonl(run / "samples.jsonl")
    t = Trackers.open(["wandb"], run, project="rlvr", run_name="run", config={"seed": 0})
    for row in rows:
        t.log_step(row, [s for s in samples if s["step"] == row["step"]] or None)
    t.finish()
    (segment,) = read_wandb(run)[3]
    (segment / f"run-{read_state(run)['wandb']['id']}.wandb.synced").touch()
    redone = [{**r, "reward/mean": 9.0} for r in rows[2:]] + [{**rows[-1], "step": 4, "reward/mean": 4.0}]
    t = Trackers.open(
        ["wandb"],
        run,
        project="rlvr",
        run_name="run",
        config={"seed": 0},
        resume=Resume(2, logged_until=3, rows=rows[:2], samples=samples),
    )
    for row in redone:
        t.log_step(row)
    t.finish()
    series, _, _, segments = read_wandb(run)
    assert len(segments) == 2
    assert series["reward/mean"] == [(0, 0.0), (1, 0.1), (2, 0.2), (3, pytest.approx(0.3)), (4, 4.0)]


# ---------------------------------------------------------------------------------------------------------------
# faults


@pytest.mark.parametrize("name", ALL)
def test_a_missing_extra_exits_2_before_anything_is_written(tmp_path, model_dir, monkeypatch, capsys, name):
    monkeypatch.setitem(sys.modules, TRACKERS[name].module, None)  # `import <module>` now fails
    assert cli_train(tmp_path, model_dir, f"log.report_to=[{name}]") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f'pip install "rlvr[{name}]"' in err and f"lists {name}" in err
    assert not (tmp_path / "R").exists()


def test_an_unwritable_tracker_folder_exits_2_before_anything_is_written(tmp_path, model_dir, monkeypatch, capsys):
    need("mlflow")
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", (blocker / "mlruns").as_uri())
    assert cli_train(tmp_path, model_dir, "log.report_to=[tensorboard, mlflow]") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "mlflow cannot write to" in err and "MLFLOW_TRACKING_URI" in err
    assert not (tmp_path / "R").exists()


def test_an_unreachable_mlflow_server_exits_2_before_anything_is_written(tmp_path, model_dir, monkeypatch, capsys):
    need("mlflow")
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{port}")
    assert cli_train(tmp_path, model_dir, "log.report_to=[mlflow]") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"cannot reach the tracking server http://127.0.0.1:{port}" in err
    assert "MLFLOW_TRACKING_URI" in err and not (tmp_path / "R").exists()


def test_a_resumed_run_whose_tensorboard_folder_is_a_file_exits_2_before_any_step(tmp_path, tokenizer):
    need("tensorboard")
    cfg = tiny_config(tmp_path, **{"train.steps": 1})
    run = train(cfg, policy=(make_tiny_llama(len(tokenizer)), tokenizer), quiet=True)
    (run / "tensorboard").write_text("in the way")
    cfg["log"]["report_to"], cfg["train"]["steps"] = ["tensorboard"], 2
    with pytest.raises(ConfigError, match=r"tensorboard cannot write to .*tensorboard \(.* is not a directory\)"):
        train(
            cfg, resume=True, allow_config_change=True, policy=(make_tiny_llama(len(tokenizer)), tokenizer), quiet=True
        )
    assert [r["step"] for r in jsonl(run / "metrics.jsonl")] == [0]


def test_a_tracker_that_cannot_start_is_a_config_error_and_a_fresh_run_leaves_nothing(tmp_path, tokenizer, monkeypatch):
    need("tensorboard", "mlflow")
    from rlvr.rundir.trackers.to_mlflow import MlflowTracker

    def refuse(self, config, resume):
        raise ConnectionError("server at http://mlflow.invalid:5000 unreachable\nretried 7 times")

    monkeypatch.setattr(MlflowTracker, "start", refuse)
    cfg = tiny_config(tmp_path, **{"log.report_to": "[tensorboard, mlflow]"})
    with pytest.raises(
        ConfigError,
        match=r"^log.report_to: mlflow could not start \(server at .* unreachable "
        r"retried 7 times\); set MLFLOW_TRACKING_URI",
    ):
        train(cfg, policy=(make_tiny_llama(len(tokenizer)), tokenizer), quiet=True)
    assert not Path(cfg["output_dir"]).exists()


def test_a_tracker_failing_mid_run_warns_once_and_the_run_loses_nothing(tmp_path, tokenizer, monkeypatch):
    need("tensorboard", "mlflow")
    from rlvr.rundir.trackers.to_tensorboard import TensorBoardTracker

    real = TensorBoardTracker.log_metrics

    def flaky(self, step, metrics, wall_time=None):
        if step == 1:
            raise OSError(28, "No space left on device")
        real(self, step, metrics, wall_time)

    monkeypatch.setattr(TensorBoardTracker, "log_metrics", flaky)
    cfg = tiny_config(tmp_path, **{"train.steps": 3, "log.report_to": "[tensorboard, mlflow]"})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = train(cfg, policy=(make_tiny_llama(len(tokenizer)), tokenizer), quiet=True)
    ours = [w for w in caught if issubclass(w.category, TrackerWarning)]
    assert len(ours) == 1 and "tensorboard failed (" in str(ours[0].message)
    assert "No space left on device" in str(ours[0].message) and "--to tensorboard" in str(ours[0].message)
    assert [r["step"] for r in jsonl(run / "metrics.jsonl")] == [0, 1, 2] and (run / "final" / "adapter").exists()
    assert [s for s, _ in read_tensorboard(run)[0]["reward/mean"]] == [0]  # it got step 0, then nothing
    check_mlflow(run)  # the other tracker got everything


def test_report_to_is_validated_like_any_config_key():
    assert resolve(None, ["log.report_to=tensorboard, wandb"])["log"]["report_to"] == ["tensorboard", "wandb"]
    assert resolve(None, ["log.report_to=[mlflow, mlflow]"])["log"]["report_to"] == ["mlflow"]
    assert resolve(None, ["log.report_to=none"])["log"]["report_to"] == []
    from rlvr.training.lifecycle import check_registered

    with pytest.raises(
        ConfigError,
        match=r"'log.report_to' lists 'tensorbord'; choose from tensorboard, mlflow, "
        r"trackio, wandb",
    ):
        check_registered(as_config(resolve(None, ["log.report_to=[tensorbord]"])))  # TRACKERS' names


def test_run_name_defaults_to_the_output_folder_and_the_main_job_names_its_rlvr_run_after_its_root(tmp_path):
    from rlvr.rundir.trackers import run_name
    from rlvr.training.main_folder import rl_phase_cfg

    cfg = resolve(None, [f"output_dir={tmp_path / 'exp-7'}"])
    assert run_name(Config.from_dict(cfg).log, cfg["output_dir"]) == "exp-7"
    rl = rl_phase_cfg(Config.from_dict(cfg), tmp_path / "exp-7")
    assert rl.output_dir == str(tmp_path / "exp-7" / "rlvr") and rl.log.run_name == "exp-7"
    assert rl_phase_cfg(as_config(resolve(None, ["log.run_name=mine"])), tmp_path / "x").log.run_name == "mine"


def test_rlvr_run_reports_its_training_and_heldout_results(tmp_path, model_dir):
    """The main job end to end with log.report_to: the RLVR run in TensorBoard, named after the root in MLflow,
    with the held-out tables and plots added at the end."""
    need("tensorboard", "mlflow")
    from rlvr.training.main_job import run_main

    cfg = tiny_config(
        tmp_path,
        **{
            "model.name": str(model_dir),
            "output_dir": str(tmp_path / "main"),
            "train.steps": 2,
            "eval.n": 1,
            "eval.ks": "[1]",
            "eval.limit": 4,
            "eval.greedy": False,
            "sft.epochs": 1,
            "log.report_to": "[tensorboard, mlflow]",
        },
    )
    run_main(cfg, quiet=True)
    run = tmp_path / "main" / "rlvr"
    scalars, _, images = read_tensorboard(run)
    want, _ = expected(run)
    overall = json.loads((tmp_path / "main" / "compare.json").read_text())["accuracy"]["rlvr"]["all"]["value"]
    assert scalars["heldout/rlvr/pass_at_1"] == [(2, pytest.approx(overall))]
    same_series({k: v for k, v in scalars.items() if not k.startswith("heldout/")}, want)
    assert images == {f"plots/{p.stem}": [2] for p in (tmp_path / "main").glob("**/*.png") if "final" not in str(p)}
    assert set(images) >= {"plots/training", "plots/compare", "plots/bands"}
    info, series, artifacts = read_mlflow(run)
    assert info.info.run_name == "main" and series["heldout/sft/pass_at_1"][0][0] == 2
    assert {"heldout/summary.json", "heldout/compare.json", "plots/training.png"} <= set(artifacts)
