"""Environments: a rollout as an episode (issue 31, in progress). The pieces that do not depend on the sampler:

    tools     a tool is a typed Python function with a docstring; its JSON schema as chat templates and TRL read it
    builtin   the built-in tools: `calculator` (exact arithmetic, no code) and `python` (rlvr's sandbox)
    calls     tool calls parsed from a policy's turn (a registry of formats; Hermes / Qwen `<tool_call>` built in),
              and run: a tool that raises returns its error text, a malformed call a short parse error
    protocol  rlvr's environment protocol: reset(problem) -> first messages; step(turn) -> messages, done, reward parts

In: a problem, the policy's turns as text. Out: the environment's messages and rewards. The episode loop that splices
the environment's token ids between the sampler's (trained on exactly what was sampled) builds on these.
"""
