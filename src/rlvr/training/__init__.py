"""Recipes: compose the components into the RL loop, the supervised baseline and the main job; no math here.

step       one RL step as a public function: `run_step(state, step) -> StepResult`; `setup` builds the state
batch      one step's batch: rollouts -> verdicts -> rewards -> dynamic sampling -> advantages (one path)
loop       `train(cfg)`: the loop (signals, budget, checkpoints, logging) around run_step
ahead      rollout.max_staleness >= 1: a thread samples each step's batch from older weights while the trainer updates
metrics    the per-step metrics line
signal_watch  the loop's warnings, signal.json and stop (train.stop_without_signal) for steps without learning signal
distributed  data parallel on torch.distributed (a no-op on one rank); fsdp: whole-weight reads of a sharded policy
sft        the supervised baseline (rejection sampling or reference traces)
main_job   `rlvr run`: start eval, RLVR, matched SFT, evals, comparison, report

In: a resolved config. Out: a run directory.

One RL step in math: what loop.train -> step.run_step computes, in order, each line with the function that computes
it (rlvr. left off). Rows i = 1..B (P prompts x G samples), g(i) the row's prompt, positions t = 1..T; m_it = 1 on
a sampled token that enters the loss; |o_i| = sum_t m_it; sg[.] = stop-gradient; tau = rollout.temperature;
mu = train.updates_per_batch; Lmax = rollout.max_new_tokens.

 0 weights   sampler <- pi_theta (LoRA merged)                          training.distributed.sync_sampler
             (rollout.max_staleness k >= 1: step s's batch is sampled,   training.ahead
             while the trainer updates, by pi_theta after max(0, s - k) updates; steps 1-6 run on that thread)
 1 prompts   q_1..q_P = the stream's next P (seeded, or a curriculum)   prompts.stream.PromptStream.take
             (CurriculumStream.take); their ids by the prompt format     prompts.chat.PromptCache
 2 sample    o_i ~ pi_sampler(. | q_g(i)) at tau, G per prompt;         sampler.generate (sampling.*), called in
             sampler_logp_it = log softmax(z_it / tau)[o_it]              sampling.scored.sample_and_score
 3 reward    r_i = sum_k w_k s_k(o_i, gold_g(i)); Verdict of term 1     verifiers.compose.Reward.__call__,
             (one call over the B rows; SFT data and validation too)    called in sampling.scored.score_rows
             a fault verdict (invalid_gold, error): m_i. = 0            training.batch.rollout_round
 4 overlong  soft: r_i += clamp((Lmax - Lc - L_i) / Lc, -1, 0),         algorithms.advantages.overlong_soft_penalty
             Lc = overlong_buffer_frac Lmax; L_i the row's length (an episode: its ids of episode.max_total_tokens)
             filter: m_i. = 0 where finish_i = "length"  (DAPO)         training.batch.overlong_shaping
 5 dynamic   keep the groups whose rewards differ; draw fresh prompts   training.batch._refill ->
   sampling  until P kept or max_sampling_rounds rounds  (DAPO)          algorithms.advantages.dynamic_sampling
 6 advantage A_i = (r_i - mean_g r) / (std_g r + eps)  (GRPO; std N-1)  algorithms.advantages.group_advantages
             "batch": / (std_B r + eps); "none" (Dr. GRPO): r_i - mean_g r; A_i = 0 where a group's r are all equal
 7 log-probs logp_it = log softmax(z_it / tau)[o_it] under pi_theta     policy.logprobs.PromptPass.logprobs, in
             (rows with A_i = 0 and beta = 0 skip the forward)            policy.update._one_pass
             old_it = sg[logp_it] (mu = 1: ratio 1, its gradient)       algorithms.losses.policy_loss
                    = pi_theta_old's, before pass 1 (mu > 1)            policy.update.fixed_logprobs
 8 ratio     token: log rho_it = logp_it - old_it                       algorithms.losses.token_log_ratio
             sequence (GSPO): log rho_i = (1/|o_i|) sum_t m_it (logp_it - old_it)   losses.sequence_log_ratio
 9 surrogate l_it = -min(rho_it A_i, clip(rho_it, 1 - eps_low, 1 + eps_high) A_i)   losses.clipped_surrogate
10 correction  w_it = sg[min(rho'_it, C)] (truncated), or 1 with tokens / rows whose rho' is outside [1/C, C]
             dropped (masked-*); rho'_it = exp(old_it - sampler_logp_it); l_it <- w_it l_it   algorithms.correction
11 KL        l_it += beta (e^x - x - 1), x = ref_it - logp_it  (k3)     algorithms.losses.kl_k3; ref from
             (beta > 0; reference: LoRA off, or a frozen copy)            policy.update.reference_logprobs
12 aggregate token-mean (DAPO)                L = sum_it m_it l_it / N_tok   algorithms.losses.aggregate
             seq-mean-token-mean (GRPO, GSPO) L = (1/N_seq) sum_i (sum_t m_it l_it / |o_i|)
             seq-mean-token-sum-norm          L = sum_it m_it l_it / (N_seq Lmax)  (Dr. GRPO)
             N_tok, N_seq: the whole batch's counts, so micro-batch losses sum to L    losses.batch_counts
13 update    L.backward() per micro-batch (rows sorted by length)       policy.update.update_policy
             g <- g min(1, c / ||g||), c = train.max_grad_norm (clip_grad_norm_); AdamW step; mu passes;
             no step where L or ||g|| is not finite (metrics: skipped = 1)
14 metrics   the step's line (docs/metrics.md): rollout figures over    training.metrics.step_metrics_row
             every generated row, update figures over the kept rows
             then the LR schedule steps (every step, updated or not)    training.step._schedule_step
"""
