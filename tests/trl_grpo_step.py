"""One real TRL GRPOTrainer step with rlvr's reward functions; run by tests/test_integrations.py under an interpreter
that has `trl` (RLVR_TRL_PYTHON, the bench's venv recipe), with rlvr on PYTHONPATH. Not a test module itself.

argv: MODEL_DIR (a tiny model + tokenizer saved by the parent) OUT_JSON. The correctness term is a verifier whose
check spins past its deadline on every completion of odd length (a timeout), raises on lengths divisible by 5
(a verifier error), and otherwise says correct when the completion has an "a" in it: a mix TRL must score.
"""

import json
import sys
import time


def main(model_dir: str, out: str) -> None:
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from rlvr.integrations.trl import reward_funcs
    from rlvr.verifiers.base import Verdict
    from rlvr.verifiers.registry import register_kind

    class Flaky:
        name = "flaky"

        def score(self, completion, problem):
            if len(completion) % 2:
                while True:  # Python-level: the deadline cuts it
                    time.sleep(0.01)
            if len(completion) % 5 == 0:
                raise RuntimeError("verifier bug")
            ok = "a" in completion
            return Verdict("correct" if ok else "wrong", float(ok), completion[:10], "")

    register_kind("flaky", lambda: Flaky(), cheap=False)
    funcs, weights = reward_funcs(
        {
            "terms": [
                {"name": "correct", "kind": "flaky", "weight": 1.0},
                {"name": "format", "kind": "boxed_format", "weight": 0.1},
            ]
        },
        workers=0,
        timeout_s=0.2,
    )
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    rows = [{"prompt": [{"role": "user", "content": f"What is {i} + 1?"}], "answer": str(i + 1)} for i in range(8)]
    args = GRPOConfig(
        output_dir=out + ".trainer",
        use_cpu=True,
        bf16=False,
        report_to="none",
        max_steps=1,
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=12,
        temperature=1.0,
        learning_rate=1e-3,
        logging_steps=1,
        save_strategy="no",
        disable_tqdm=True,
        seed=0,
        reward_weights=weights,
        beta=0.0,
        dataloader_num_workers=0,
    )
    trainer = GRPOTrainer(
        model=model, processing_class=tokenizer, reward_funcs=funcs, args=args, train_dataset=Dataset.from_list(rows)
    )
    # record what the reward functions hand TRL: a transparent stand-in around each, called as TRL calls it
    calls = []
    trainer.reward_funcs = [_Recorder(f, calls) for f in funcs]
    trainer.train()
    logs = [h for h in trainer.state.log_history if "loss" in h or any(k.startswith("verdict/") for k in h)]
    json.dump(
        {
            "global_step": trainer.state.global_step,
            "logs": logs,
            "calls": calls,
            "counts": [dict(f.counts) for f in funcs],
        },
        open(out, "w"),
    )


class _Recorder:
    """A transparent stand-in TRL calls like the function it wraps; it keeps what the function returned."""

    def __init__(self, func, calls):
        self.func, self.calls, self.__name__ = func, calls, func.__name__

    def __call__(self, *args, **kwargs):
        got = self.func(*args, **kwargs)
        self.calls.append(
            {
                "name": self.__name__,
                "rewards": got,
                "lengths": [len(c[0]["content"]) if isinstance(c, list) else len(c) for c in kwargs["completions"]],
            }
        )
        return got


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
