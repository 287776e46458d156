"""The CTranslate2 and OpenVINO workers of `rlvr bench --vs ct2|openvino` without either engine (this venv has
neither): the modules import, their contract constants agree, the step figures are right by hand, the engine
options follow the spec, and each worker's protocol (ready, step, sync) runs against a stand-in engine."""

import importlib
import io
import re
import sys
import types
from pathlib import Path
from types import SimpleNamespace

import pytest

import rlvr_bench.engines as engines
from rlvr_bench.engines import ct2, openvino


def spec_for(tmp_path, engine, precision, **kw):
    return {
        "model": "/models/smollm2",
        "prompts": 2,
        "group": 2,
        "max_new_tokens": 16,
        "temperature": 1.0,
        "top_p": 1.0,
        "top_k": 0,
        "seed": 3,
        "threads": 2,
        "steps": 1,
        "stop_ids": [2],
        "prompt_ids": [[[1, 5, 6], [1, 7]]],
        "engine": engine,
        "precision": precision,
        "work_dir": str(tmp_path / f"{engine}-{precision}"),
        **kw,
    }


def test_the_modules_import_without_their_engines():
    assert "ctranslate2" not in sys.modules and "openvino" not in sys.modules and "openvino_genai" not in sys.modules
    for name in ("ct2", "openvino"):
        assert engines.engine_module(name) is importlib.import_module(f"rlvr_bench.engines.{name}")


@pytest.mark.parametrize("mod", [ct2, openvino])
def test_contract_constants_agree(mod):
    torches = re.findall(r"torch(?!vision)\S*", mod.RECIPE)
    assert torches and set(torches) == {"torch==2.13.0"}  # every torch install pinned: unpinned, a CUDA build comes
    assert all("." not in name for name in mod.PACKAGES)  # the venv probe's find_spec takes top-level names
    assert mod.PRECISIONS[1] == "int8" and len(set(mod.PRECISIONS)) == len(mod.PRECISIONS)
    assert mod.LOGPROBS.startswith("yes") and "\n" not in mod.LOGPROBS


def test_ct2_constants():
    assert ct2.PRECISIONS == ("float32", "int8")  # CTranslate2 computes no bf16 on a CPU without AMX
    assert "ctranslate2==4.8.5" in ct2.RECIPE and ct2.PACKAGES["ctranslate2"] == "ctranslate2"


def test_openvino_constants():
    assert openvino.PRECISIONS[0] == "bf16" and set(openvino.SETTINGS) == set(openvino.PRECISIONS)
    assert "openvino-genai==2026.4.1.0" in openvino.RECIPE and "optimum-intel[openvino]==2.2.0" in openvino.RECIPE
    # torchvision pinned to the torch 2.13.0 build (else it pulls a newer CUDA torch), then removed
    assert "torchvision==0.28.0" in openvino.RECIPE and openvino.RECIPE.endswith("pip uninstall -y torchvision")
    assert {"openvino", "openvino_genai", "openvino_tokenizers", "optimum"} <= set(openvino.PACKAGES)


def test_ct2_figures_by_hand():
    # rows (ids, mean log-prob): lengths 3, 4, 1 = 8 tokens; rows 1 and 3 end at the stop id 2
    out = ct2.figures([([5, 6, 2], -0.5), ([7, 7, 7, 7], -1.0), ([2], -0.25)], [2], 2)
    # sums -1.5, -4.0, -0.25 = -5.75 over 8 tokens
    assert out == {
        "gen_tokens": 8,
        "rows": 3,
        "stopped": 2,
        "lengths": [3, 4, 1],
        "mean_len": pytest.approx(8 / 3),
        "logp_mean": pytest.approx(-0.71875),
        "threads": 2,
    }
    assert ct2.figures([], [2], 2)["logp_mean"] is None


def test_openvino_figures_by_hand():
    # the same rows with GenAI's scores, which are sums already
    out = openvino.figures([([5, 6, 2], -1.5), ([7, 7, 7, 7], -4.0), ([2], -0.25)], [2, 9], 4)
    assert (out["gen_tokens"], out["stopped"], out["lengths"], out["threads"]) == (8, 2, [3, 4, 1], 4)
    assert out["logp_mean"] == pytest.approx(-0.71875) and out["mean_len"] == pytest.approx(8 / 3)


def test_ct2_options_follow_the_spec(tmp_path):
    spec = spec_for(tmp_path, "ct2", "int8")
    kw = ct2.generate_kwargs(spec)
    assert (
        kw["num_hypotheses"],
        kw["max_length"],
        kw["sampling_topk"],
        kw["sampling_topp"],
        kw["sampling_temperature"],
    ) == (2, 16, 0, 1.0, 1.0)
    assert kw["end_token"] == [2] and kw["return_end_token"] and not kw["include_prompt_in_result"]
    assert ct2.generate_kwargs({**spec, "top_k": 50})["sampling_topk"] == 50
    assert ct2.seed_for(spec, 2) == 3 * 1_000_003 + 2


def test_openvino_options_follow_the_spec(tmp_path):
    spec = spec_for(tmp_path, "openvino", "bf16")
    f = openvino.config_fields(spec, 2, 1)
    assert (f["num_return_sequences"], f["max_new_tokens"], f["temperature"], f["top_p"], f["do_sample"]) == (
        2,
        16,
        1.0,
        1.0,
        True,
    )
    assert "top_k" not in f and openvino.config_fields({**spec, "top_k": 40}, 0, 0)["top_k"] == 40
    assert f["stop_token_ids"] == {2} and f["logprobs"] == 1
    assert f["rng_seed"] == 3 * 1_000_003 + 2 + 7919 and openvino.seed_for(spec, 2, 0) == 3 * 1_000_003 + 2
    cmd = openvino.export_command(spec, "/out")
    assert cmd[:3] == [sys.executable, "-m", "optimum.commands.optimum_cli"] and cmd[-1] == "/out"
    assert cmd[cmd.index("--weight-format") + 1] == "fp16"
    assert "int8" in openvino.export_command({**spec, "precision": "int8"}, "/out")
    assert openvino.plugin_properties(spec, ["FP32", "BF16"]) == {
        "INFERENCE_NUM_THREADS": 2,
        "INFERENCE_PRECISION_HINT": "bf16",
        "KV_CACHE_PRECISION": "bf16",
    }
    assert openvino.plugin_properties(spec, ["FP32"])["INFERENCE_PRECISION_HINT"] == "f32"


def serve_with(monkeypatch, lines):
    """Feed the worker `lines` and collect what it emits."""
    events = []
    monkeypatch.setattr(engines, "emit", lambda event, **fields: events.append({"event": event, **fields}))
    monkeypatch.setattr(sys, "stdin", io.StringIO(lines))
    return events


def test_ct2_worker_protocol_with_a_stand_in(tmp_path, monkeypatch):
    calls = {"loads": [], "unloads": 0, "seeds": [], "batches": []}

    class Generator:
        def __init__(self, path, **kw):
            calls["loads"].append((path, kw))

        def generate_batch(self, tokens, **kw):
            calls["batches"].append((tokens, kw))
            return [SimpleNamespace(sequences_ids=[[1, 2], [3, 4, 5]], scores=[-0.5, -1.0]) for _ in tokens]

        def unload_model(self):
            calls["unloads"] += 1

    class TransformersConverter:
        def __init__(self, model):
            assert model == "/models/smollm2"

        def convert(self, out, quantization, force):
            assert quantization == "int8" and force
            Path(out).mkdir(parents=True)
            return out

    fake = types.ModuleType("ctranslate2")
    fake.__version__, fake.Generator, fake.set_random_seed = "0.0", Generator, calls["seeds"].append
    fake.converters = types.ModuleType("ctranslate2.converters")
    fake.converters.TransformersConverter = TransformersConverter
    monkeypatch.setitem(sys.modules, "ctranslate2", fake)
    monkeypatch.setitem(sys.modules, "ctranslate2.converters", fake.converters)
    import transformers

    tok = SimpleNamespace(convert_ids_to_tokens=lambda ids: [f"t{i}" for i in ids])
    monkeypatch.setattr(transformers, "AutoTokenizer", SimpleNamespace(from_pretrained=lambda path: tok))
    events = serve_with(monkeypatch, "step\nsync\n")
    spec = spec_for(tmp_path, "ct2", "int8")
    ct2.run_worker(spec)

    assert [e["event"] for e in events] == ["ready", "step", "sync"]
    assert events[0]["precision"] == "int8" and events[0]["versions"]["ctranslate2"] == "0.0"
    # two prompts x rows of 2 and 3 tokens, the first stopped: 10 tokens, logp (2 x -0.5 + 3 x -1) x 2 / 10
    step = events[1]
    assert (step["gen_tokens"], step["rows"], step["stopped"], step["lengths"]) == (10, 4, 2, [2, 3, 2, 3])
    assert step["logp_mean"] == pytest.approx(-0.8) and step["seconds"] >= 0
    assert calls["batches"][0][0] == [["t1", "t5", "t6"], ["t1", "t7"]] and calls["seeds"] == [3 * 1_000_003]
    assert calls["batches"][0][1]["num_hypotheses"] == 2
    assert all(
        kw == {"device": "cpu", "compute_type": "int8", "intra_threads": 2, "inter_threads": 1}
        for _, kw in calls["loads"]
    )
    # the sync converted into a fresh folder, freed the old model and removed its folder
    assert [Path(p).name for p, _ in calls["loads"]] == ["model-0", "model-1"] and calls["unloads"] == 1
    assert not (tmp_path / "ct2-int8" / "model-0").exists() and (tmp_path / "ct2-int8" / "model-1").is_dir()
    assert {"convert_s", "load_s", "seconds"} <= set(events[2])


def test_openvino_worker_protocol_with_a_stand_in(tmp_path, monkeypatch):
    calls = {"pipes": [], "generate": [], "exports": []}

    class Pipe:
        def __init__(self, path, scheduler, device, properties):
            calls["pipes"].append((path, device, properties))

        def generate(self, ids, configs):
            calls["generate"].append((ids, configs))
            return [SimpleNamespace(m_generation_ids=[[1, 2], [3, 4, 5]], m_scores=[-1.0, -3.0]) for _ in ids]

    ov = types.ModuleType("openvino")
    ov.Tensor = lambda array: array.tolist()
    ov.Core = lambda: SimpleNamespace(get_property=lambda device, name: ["FP32", "BF16"])
    ov.get_version = lambda: "0.0"
    genai = types.ModuleType("openvino_genai")
    genai.ContinuousBatchingPipeline, genai.SchedulerConfig = Pipe, lambda: "scheduler"
    genai.GenerationConfig = SimpleNamespace
    monkeypatch.setitem(sys.modules, "openvino", ov)
    monkeypatch.setitem(sys.modules, "openvino_genai", genai)

    def run(cmd, **kw):
        calls["exports"].append(cmd)
        Path(cmd[-1]).mkdir(parents=True)
        return SimpleNamespace(returncode=0, stdout="exported\n")

    monkeypatch.setattr(openvino.subprocess, "run", run)
    import importlib.metadata

    monkeypatch.setattr(importlib.metadata, "version", lambda name: "1.0")
    events = serve_with(monkeypatch, "step\nsync\n")
    openvino.run_worker(spec_for(tmp_path, "openvino", "int8"))

    assert [e["event"] for e in events] == ["ready", "step", "sync"]
    assert events[0]["inference_precision"] == "bf16" and events[0]["versions"]["openvino-genai"] == "1.0"
    step = events[1]
    # sums -1 and -3 a prompt over 5 tokens a prompt
    assert (step["gen_tokens"], step["stopped"], step["lengths"]) == (10, 2, [2, 3, 2, 3])
    assert step["logp_mean"] == pytest.approx(-0.8)
    ids, configs = calls["generate"][0]
    assert ids == [[[1, 5, 6]], [[1, 7]]] and [c.rng_seed for c in configs] == [3 * 1_000_003, 3 * 1_000_003 + 7919]
    assert all(c.num_return_sequences == 2 and c.do_sample for c in configs)
    assert [c[c.index("--weight-format") + 1] for c in calls["exports"]] == ["int8", "int8"]
    assert [Path(p).name for p, _, _ in calls["pipes"]] == ["model-0", "model-1"]
    assert calls["pipes"][0][1:] == (
        "CPU",
        {"INFERENCE_NUM_THREADS": 2, "INFERENCE_PRECISION_HINT": "bf16", "KV_CACHE_PRECISION": "bf16"},
    )
    assert not (tmp_path / "openvino-int8" / "model-0").exists()


def test_a_failed_export_says_so(tmp_path, monkeypatch):
    ov = types.ModuleType("openvino")
    ov.Core = lambda: SimpleNamespace(get_property=lambda device, name: ["FP32"])
    monkeypatch.setitem(sys.modules, "openvino", ov)
    monkeypatch.setitem(sys.modules, "openvino_genai", types.ModuleType("openvino_genai"))
    monkeypatch.setattr(openvino.subprocess, "run", lambda cmd, **kw: SimpleNamespace(returncode=1, stdout="no torch"))
    with pytest.raises(RuntimeError, match="exit 1.*no torch"):
        openvino.run_worker(spec_for(tmp_path, "openvino", "bf16"))
