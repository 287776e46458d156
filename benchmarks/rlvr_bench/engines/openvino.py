"""OpenVINO (`rlvr bench --vs openvino`): OpenVINO GenAI's continuous-batching pipeline on the CPU plugin.

The worker exports rlvr's safetensors folder with OpenVINO's own tool, `optimum-cli export openvino` (optimum-intel;
run as a child process, so `convert_s` includes that interpreter's start-up), which also writes the OpenVINO
tokenizer the pipeline loads. It then loads `openvino_genai.ContinuousBatchingPipeline` (the engine under GenAI's
`LLMPipeline` on a CPU, called directly because it takes each prompt's token ids unpadded with a config of its
own) with `INFERENCE_NUM_THREADS` = the bench's threads and bf16 inference and KV cache, and samples each batch in
one `generate` call: every prompt with `num_return_sequences=G`, multinomial sampling at the spec's temperature
(no top-k, top-p 1), the stop ids as stop tokens (kept in the row and counted), `logprobs=1` so each row's score
is the sum of its tokens' log-probs.

Precisions: "bf16" = fp16 weights (`--weight-format fp16`) computed in bf16 (the CPU plugin converts them; it
lists BF16 among this CPU's capabilities), the closest to rlvr's bf16; "int8" = int8 weights (NNCF's per-channel
int8_asym, `--weight-format int8`), still bf16 activations and KV cache, so the two rows differ only by weights.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from rlvr_bench.engines import replace_model, serve, timed
from rlvr_bench.rollouts import step_result

# what the worker and the export it runs import; find_spec probes top-level names, so optimum-intel is "optimum"
PACKAGES = {
    "openvino": "openvino",
    "openvino_genai": "openvino-genai",
    "openvino_tokenizers": "openvino-tokenizers",
    "optimum": "optimum-intel",
    "nncf": "nncf",
    "transformers": "transformers",
    "torch": "torch",
    "numpy": "numpy",
}
# optimum-intel requires torchvision, whose newest release pulls a newer (CUDA) torch: pin the one built for
# torch 2.13.0, then remove it (it does not load against the CPU torch, and transformers then fails to import;
# the export needs no torchvision)
RECIPE = (
    "python3 -m venv openvino-venv && openvino-venv/bin/pip install torch==2.13.0 && "
    "openvino-venv/bin/pip install torch==2.13.0 torchvision==0.28.0 'optimum-intel[openvino]==2.2.0' "
    "openvino-genai==2026.4.1.0 && openvino-venv/bin/pip uninstall -y torchvision"
)
PRECISIONS = ("bf16", "int8")
# precision -> (optimum-cli --weight-format, the CPU plugin's inference and KV cache precision)
SETTINGS = {"bf16": ("fp16", "bf16"), "int8": ("int8", "bf16")}
LOGPROBS = (
    "yes: with GenerationConfig.logprobs=1 each row's score is the sum of its sampled tokens' log-probs "
    "(stop token included)"
)


def seed_for(spec: dict, step: int, prompt: int) -> int:
    """A prompt's seed in a batch: GenAI seeds each request (its G rows) on its own, so the batch's seed, as rlvr's
    sampler seeds it, plus a stride a prompt."""
    return spec["seed"] * 1_000_003 + step + 7919 * prompt


def export_command(spec: dict, out: str) -> list[str]:
    """optimum-cli's export of the spec's model at its precision, under this interpreter."""
    weights, _ = SETTINGS[spec["precision"]]
    return [
        sys.executable,
        "-m",
        "optimum.commands.optimum_cli",
        "export",
        "openvino",
        "--model",
        spec["model"],
        "--task",
        "text-generation-with-past",
        "--weight-format",
        weights,
        out,
    ]


def plugin_properties(spec: dict, capabilities) -> dict:
    """The CPU plugin's properties: the bench's threads; bf16 inference and KV cache where the CPU computes bf16,
    else f32."""
    _, precision = SETTINGS[spec["precision"]]
    if precision == "bf16" and "BF16" not in capabilities:
        precision = "f32"
    return {
        "INFERENCE_NUM_THREADS": spec["threads"],
        "INFERENCE_PRECISION_HINT": precision,
        "KV_CACHE_PRECISION": precision,
    }


def config_fields(spec: dict, step: int, prompt: int) -> dict:
    """GenerationConfig's fields for one prompt: G rows sampled from the full distribution at the spec's
    temperature, stopping at a stop id or after max_new_tokens, with their log-probs."""
    fields = {
        "do_sample": True,
        "num_return_sequences": spec["group"],
        "max_new_tokens": spec["max_new_tokens"],
        "temperature": spec["temperature"],
        "top_p": spec["top_p"],
        "rng_seed": seed_for(spec, step, prompt),
        "stop_token_ids": set(spec["stop_ids"]),
        "eos_token_id": spec["stop_ids"][0],
        "logprobs": 1,
    }
    if spec["top_k"]:  # GenAI's default top_k is "all"; 0 is not that
        fields["top_k"] = spec["top_k"]
    return fields


def figures(rows: list[tuple[list[int], float]], stop_ids, threads: int) -> dict:
    """A batch's step figures from GenAI's rows as (token ids, score): a row stopped when its last token is a stop
    id; a score is the sum of the row's log-probs, so the batch's mean log-prob is sum(score) / sum(length)."""
    stops = set(stop_ids)
    lengths = [len(ids) for ids, _ in rows]
    stopped = sum(1 for ids, _ in rows if ids and ids[-1] in stops)
    total = sum(lengths)
    return step_result(lengths, stopped, threads, sum(score for _, score in rows) / total if total else None)


def run_worker(spec: dict) -> None:
    """Child, under the OpenVINO venv: export, load, then serve batches and syncs."""
    from importlib.metadata import version

    import numpy as np
    import openvino as ov
    import openvino_genai

    work = Path(spec["work_dir"])
    work.mkdir(parents=True, exist_ok=True)
    properties = plugin_properties(spec, ov.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES"))
    state = {"version": 0, "model": None, "dir": None}

    def convert() -> tuple[Path, float]:
        out = work / f"model-{state['version']}"
        state["version"] += 1
        shutil.rmtree(out, ignore_errors=True)
        proc, seconds = timed(
            subprocess.run, export_command(spec, str(out)), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        sys.stderr.write(proc.stdout)  # the export's chatter goes to the worker's log, never to stdout
        if proc.returncode != 0:
            raise RuntimeError(f"optimum-cli export openvino failed (exit {proc.returncode}): {proc.stdout[-2000:]}")
        return out, seconds

    def load(path: Path) -> float:
        return replace_model(
            state,
            lambda p: openvino_genai.ContinuousBatchingPipeline(
                str(p), openvino_genai.SchedulerConfig(), "CPU", properties
            ),
            path,
        )

    path, convert_s = convert()
    load_s = load(path)

    def generate(step: int, prompts: list[list[int]]) -> dict:
        configs = []
        for i in range(len(prompts)):
            config = openvino_genai.GenerationConfig()
            for k, v in config_fields(spec, step, i).items():
                setattr(config, k, v)
            configs.append(config)
        results = state["model"].generate([ov.Tensor(np.array([p], dtype=np.int64)) for p in prompts], configs)
        return figures(
            [(list(ids), score) for r in results for ids, score in zip(r.m_generation_ids, r.m_scores)],
            spec["stop_ids"],
            spec["threads"],
        )

    def sync() -> dict:
        new, c = convert()
        return {"convert_s": c, "load_s": load(new)}

    print(
        f"openvino {ov.get_version()}: {spec['precision']} ({properties}) from {spec['model']} exported in "
        f"{convert_s:.1f} s, loaded in {load_s:.1f} s",
        file=sys.stderr,
        flush=True,
    )
    versions = {
        name: version(name) for name in ("openvino", "openvino-genai", "optimum-intel", "nncf", "transformers", "torch")
    }
    serve(
        spec,
        generate,
        sync,
        {
            "convert_s": convert_s,
            "load_s": load_s,
            "precision": spec["precision"],
            "inference_precision": properties["INFERENCE_PRECISION_HINT"],
            "logprobs": LOGPROBS,
            "versions": versions,
        },
    )


__all__ = [
    "PACKAGES",
    "RECIPE",
    "PRECISIONS",
    "SETTINGS",
    "LOGPROBS",
    "run_worker",
    "figures",
    "config_fields",
    "export_command",
    "plugin_properties",
    "seed_for",
]
