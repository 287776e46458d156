"""Recipes: compose the components into the RL loop, the supervised baseline and the main job; no math here.

step       one RL step as a public function: `run_step(state, step) -> StepResult`; `setup` builds the state
batch      one step's batch: rollouts -> verdicts -> rewards -> dynamic sampling -> advantages (one path)
loop       `train(cfg)`: the loop (signals, budget, checkpoints, logging) around run_step
metrics    the per-step metrics line
signal_watch  the loop's warnings, signal.json and stop (train.stop_without_signal) for steps without learning signal
distributed  data parallel on torch.distributed (a no-op on one rank); fsdp: whole-weight reads of a sharded policy
sft        the supervised baseline (rejection sampling or reference traces)
main_job   `rlvr run`: start eval, RLVR, matched SFT, evals, comparison, report

In: a resolved config. Out: a run directory.
"""
