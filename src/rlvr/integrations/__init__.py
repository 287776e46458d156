"""rlvr inside other trainers, and other trainers' recipes inside rlvr (docs/integrations.md).

In: another framework's calling convention. Out: rlvr's verdicts in that framework's form.
- `trl.reward_funcs(spec)` -> (TRL reward functions, reward_weights): `(prompts, completions, **columns) ->
  list[float | None]`, None for a fault verdict (timeout, verifier error, unusable gold), counted in TRL's logs.
- `verl.compute_score(data_source, solution_str, ground_truth, extra_info)` -> {"score", "acc", "status", ...}:
  verl's custom reward function (and `compute_score_batch` for its batch reward manager).
- `openrlhf.reward_func(queries, prompts, labels)` -> {"rewards", "scores", "extra_logs"}: OpenRLHF's reward file.
- `trl_recipe.convert(recipe)` -> (an rlvr config, the keys it could not map and why): `rlvr convert-config trl`
  and `rlvr train --from-trl`.
Every adapter scores through `rlvr.verifiers` (the same verifiers, verdicts, deadlines, worker pool and sandbox as
rlvr's own training); the gold answer is read by the gold-column rule (rlvr.tasks.base.GOLD_COLUMNS). No framework
is imported by rlvr itself: each adapter imports its framework's pieces (if any) lazily.
"""
