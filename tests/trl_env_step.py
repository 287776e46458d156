"""Real TRL GRPOTrainer steps with environments; run by tests/test_environments_trl_class.py under an interpreter
that has `trl` (RLVR_TRL_PYTHON), with rlvr and the test's environment module on PYTHONPATH. Not a test module.

argv: MODEL_DIR (a tiny model + the SmolLM2 tokenizer) OUT_JSON ENV_MODULE. Two steps, each one TRL step:
1. TRL's own loop with the test's TRL environment class (`Counter`) and reward function (`said_done`) on rlvr's
   arithmetic rows: what each rollout's reset returned, the completion TRL made and every reward it was paid are
   recorded, for the parent to replay through rlvr's adapter.
2. rlvr's tool_arithmetic environment as TRL's environment_factory (rlvr.integrations.trl.environment_class), with
   rlvr's reward functions for the task.
The tokenizer gets TRL's Qwen3 chat template: TRL parses tool calls only for the templates it knows.
"""

import importlib
import json
import sys


def trainer_args(out: str):
    from trl import GRPOConfig

    return GRPOConfig(
        output_dir=out,
        use_cpu=True,
        bf16=False,
        report_to="none",
        max_steps=1,
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=16,
        logging_steps=1,
        save_strategy="no",
        disable_tqdm=True,
        seed=0,
        beta=0.0,
        dataloader_num_workers=0,
    )


def main(model_dir: str, out: str, env_module: str) -> None:
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOTrainer
    from trl.chat_template_utils import qwen3_chat_template

    from rlvr.integrations.trl import environment_class, environment_dataset, reward_funcs

    module = importlib.import_module(env_module)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.chat_template = qwen3_chat_template
    rollouts = []

    class Recorded(module.Counter):
        def reset(self, **row):
            self.observation = super().reset(**row)
            self.row_id = row["id"]
            return self.observation

    def said_done(prompts, completions, environments, **kwargs):
        paid = module.said_done(prompts=prompts, completions=completions, environments=environments, **kwargs)
        for prompt, completion, env, value in zip(prompts, completions, environments, paid):
            rollouts.append(
                {
                    "id": env.row_id,
                    "observation": env.observation,
                    "prompt": prompt,
                    "completion": completion,
                    "rewards": {"Counter": env.get_reward(), "said_done": value},
                }
            )
        return paid

    rows = environment_dataset("arithmetic")[:8]
    trainer = GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(model_dir),
        processing_class=tokenizer,
        reward_funcs=[said_done],
        args=trainer_args(out + ".trl-class"),
        train_dataset=Dataset.from_list([{"prompt": r["prompt"], "answer": r["answer"], "id": r["id"]} for r in rows]),
        environment_factory=Recorded,
    )
    trainer.train()
    first = {"global_step": trainer.state.global_step, "tools": [t.__name__ for t in trainer.tools]}
    first["logs"] = [h for h in trainer.state.log_history if "loss" in h]

    funcs, weights = reward_funcs({"task": {"name": "tool_arithmetic"}}, workers=0)
    args = trainer_args(out + ".rlvr-env")
    args.reward_weights = weights
    rows = environment_dataset("tool_arithmetic")[:8]
    ours = GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(model_dir),
        processing_class=tokenizer,
        reward_funcs=funcs,
        args=args,
        train_dataset=Dataset.from_list([{"prompt": r["prompt"], "answer": r["answer"]} for r in rows]),
        environment_factory=environment_class("tool_arithmetic", tools=["calculator", "python"]),
    )
    ours.train()
    second = {"global_step": ours.state.global_step, "tools": [t.__name__ for t in ours.tools]}
    second["logs"] = [h for h in ours.state.log_history if "loss" in h]
    json.dump({"trl_class": first, "rollouts": rollouts, "rlvr_env": second}, open(out, "w"), default=str)


if __name__ == "__main__":
    main(*sys.argv[1:4])
