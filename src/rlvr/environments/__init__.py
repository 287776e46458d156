"""Environments: a rollout as an episode, the policy's turns and the environment's answers (docs/environments.md).

    protocol       rlvr's environment protocol: reset(problem) -> first messages; step(turn) -> messages, done, reward
                   parts
    tools          a tool is a typed Python function with a docstring; its JSON schema as chat templates and TRL read it
    calls          tool calls parsed from a policy's turn (a registry of formats; Hermes / Qwen `<tool_call>` built in),
                   and run: a tool that raises returns its error text, a malformed call a short parse error
    builtin        the built-in tools: `calculator` (exact arithmetic, no code) and `python` (rlvr's sandbox)
    episode        episodes token in / token out: the sampler's ids with the environment's spliced in (mask 0)
    stepping       an environment's step under a deadline, a fault costing its episode; a round on threads or batched
    tool_env       the tool-use environment: tool outputs back each turn, the final answer graded by rlvr's verifiers
    retry          any task as several attempts: a wrong answer told so, the right one paid discounted per attempt
    build          the environment and tool registries (names or module:attr); one factory per run, checked early
    figures        an episode's verdict and transcript, the episode/* figures, its samples.jsonl fields
    openings       an episode run's opening (the tools shown) as final/prompt_template.json records it
    foreign        what other projects' environments share: a problem as their row, their rewards, episode.grader
    trl_class      a TRL environment_factory class: reset(**row), public methods as tools, its reward functions
    verifiers_env  a verifiers environment's own rollout, rlvr as its model
    openenv_env    an OpenEnv environment in process: the observation as prompt, the turn as its typed action

In: a problem, the policy's turns as text (an episode: the sampler it is handed). Out: the environment's messages
and rewards; an episode's token ids, the environment's masked out, and its return.
"""
