"""One round of environment steps after the policy's answers, one at a time against batched (`step_batch`): the
default task's reward grading 32 final answers (half right) through `take_steps`, as an episode step takes them.

    PYTHONPATH=src python benchmarks/bench_env_round.py [--env tools|retry] [--rows 32] [--reps 6]

Prints the median seconds of a round (the first, which imports and warms math-verify, left out) both ways and the
rewards, which must agree. Measured: docs/environments.md.
"""

from __future__ import annotations

import argparse
import statistics
import time


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--env", choices=("tools", "retry"), default="tools")
    p.add_argument("--rows", type=int, default=32)
    p.add_argument("--reps", type=int, default=6)
    args = p.parse_args()

    from rlvr.config import RewardConfig
    from rlvr.environments.builtin import calculator
    from rlvr.environments.retry import RetryEnvironment
    from rlvr.environments.stepping import take_step, take_steps
    from rlvr.environments.tool_env import ToolEnvironment
    from rlvr.environments.tools import tool_from_function
    from rlvr.tasks import load_task
    from rlvr.verifiers.compose import task_reward

    task = load_task("arithmetic", per_band=max(args.rows, 40))
    _, reward = task_reward(RewardConfig(), task)
    problems = task.problems("train")[: args.rows]
    turns = [f"The answer is \\boxed{{{int(p.answer) + (i % 2)}}}." for i, p in enumerate(problems)]

    def envs():
        made = [
            ToolEnvironment(task.messages, reward, {"calculator": tool_from_function(calculator)})
            if args.env == "tools"
            else RetryEnvironment(task, reward, attempts=1)
            for _ in problems
        ]
        for env, problem in zip(made, problems):
            env.reset(problem)
        return made

    def one_by_one(made):  # take_steps as it was without step_batch: each answer graded alone, on 8 threads
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=8) as pool:
            return list(pool.map(lambda env, turn: take_step(env, turn, 30.0), made, turns))

    for name, take in (("one at a time", one_by_one), ("batched", lambda made: take_steps(made, turns, 30.0, 8))):
        times, total = [], 0.0
        for _ in range(args.reps):
            made = envs()
            t0 = time.perf_counter()
            out = take(made)
            times.append(time.perf_counter() - t0)
            total = sum(step.reward_parts["answer"] for step, _ in out)
        print(
            f"{args.env}, {name}: a round of {args.rows} answers {statistics.median(times[1:]):.3f} s "
            f"(first {times[0]:.2f} s), reward total {total:.2f}"
        )


if __name__ == "__main__":
    main()
