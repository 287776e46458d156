"""Reference traces written by a function of the row (`sft.reference: package.module:attr`), for data that has no
trace column: a user with their own tool writes a few lines that say how one problem is solved with it, and the
supervised baseline (`sft.source: reference`) fine-tunes on the result before RL (train.init_from_sft).

The function takes a Problem (its `meta` holds the row's other columns) and returns the answer's text, or the
episode after the question as chat messages: the assistant's turns, each calling tools or giving the answer. Each
trace is played through the run's own environment (the one RL episodes use: the same tools, call format and
grader), so the tools' results in it are what the tools return: a tool message the function wrote itself must be
exactly that, and one it left out is filled in. A trace whose answer the task's verifier does not grade `correct` is
dropped and counted (a warning names how many); one that cannot be an episode (the function raised, returned
something else, a call failed, the episode ends before or after it) stops the run in one line naming the problem.
"""

from __future__ import annotations

import sys

from rlvr.config import Config, ConfigError
from rlvr.environments.build import environment_factory
from rlvr.environments.episode import release
from rlvr.registry import is_plugin, load_attr

KEY = "sft.reference"


def reference_function(c: Config, problems: list):
    """The function sft.reference names, or None to read the traces from the sft.reference_field column. ConfigError
    naming both keys when both could give the traces or neither can, before a model loads."""
    ref, field = c.sft.reference, c.sft.reference_field
    if ref and c.sft.source != "reference":
        raise ConfigError(f"{KEY}={ref!r} is read with sft.source: reference; sft.source is {c.sft.source!r}")
    if c.sft.source != "reference":
        return None
    with_column = sum(1 for p in problems if field and isinstance(p.meta, dict) and p.meta.get(field))
    if ref and with_column:
        raise ConfigError(
            f"{KEY}={ref!r} and sft.reference_field={field!r} both give reference traces ({with_column} training "
            f"problems have a {field!r} column): set sft.reference_field: '' to use the function, or drop {KEY}"
        )
    if not ref and not with_column:
        raise ConfigError(
            f"sft.source=reference: no training problem has a {field!r} column (sft.reference_field) and {KEY} names "
            f"no function; add the column, or set {KEY}: package.module:attr, a function (problem) -> trace"
        )
    if not ref:
        return None
    if not is_plugin(ref):
        raise ConfigError(f"{KEY}={ref!r}: write package.module:attr, a function (problem) -> trace")
    fn = load_attr(ref, KEY)
    if not callable(fn):
        raise ConfigError(f"{KEY}={ref!r} is not a function; it should take a problem and return its trace")
    return fn


def _written(fn, ref: str, p) -> str | list[dict]:
    """fn(p), checked to be a trace: a non-empty text, or chat messages starting with the assistant's turn."""
    where = f"{KEY}={ref!r} on problem {p.id!r}"
    try:
        trace = fn(p)
    except Exception as e:
        raise ConfigError(f"{where} raised {type(e).__name__}: {e}") from None
    if isinstance(trace, str) and trace.strip():
        return trace
    if not isinstance(trace, list) or not trace:
        raise ConfigError(
            f"{where} returned {trace!r:.60}; a trace is the answer's text or a list of chat messages "
            "({'role': 'assistant', 'content': ...}, then the tools' messages)"
        )
    for i, m in enumerate(trace):
        if not (isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)):
            raise ConfigError(f"{where}: message {i} is {m!r:.60}; each message is {{'role': ..., 'content': str}}")
    if trace[0]["role"] != "assistant":
        raise ConfigError(
            f"{where}: the trace starts with a {trace[0]['role']!r} message; it starts with the assistant's"
        )
    return trace


def _turns(trace: list[dict]) -> list[tuple[str, list[dict]]]:
    """[(assistant text, the messages written after it)] of a trace."""
    out: list[tuple[str, list[dict]]] = []
    for m in trace:
        if m["role"] == "assistant":
            out.append((m["content"], []))
        else:
            out[-1][1].append(m)
    return out


def play(env, p, trace: list[dict], where: str, max_turns: int) -> tuple[list[dict], object]:
    """The trace as the environment answers it: (assistant turns with the environment's own messages between them,
    the final step). ConfigError where the function's tool messages differ from the tools', a call fails, or the
    episode ends before or after the trace does."""
    turns = _turns(trace)
    if len(turns) > max_turns:
        raise ConfigError(f"{where}: the trace has {len(turns)} assistant turns; episode.max_turns is {max_turns}")
    env.reset(p)
    played, step = [], None
    for n, (turn, written) in enumerate(turns, 1):
        if step is not None and step.done:
            raise ConfigError(f"{where}: the episode ended at assistant turn {n - 1} of {len(turns)} (no tool call)")
        step = env.step(turn)
        failed = [s for s in getattr(step, "tool_statuses", []) if s != "ok"]
        if failed:
            said = " | ".join(m["content"] for m in step.messages)
            raise ConfigError(f"{where}: assistant turn {n}'s tool call failed ({', '.join(failed)}): {said:.160}")
        answers = [m["content"] for m in step.messages]
        if written and [m["content"] for m in written] != answers:
            raise ConfigError(
                f"{where}: after assistant turn {n} the trace says {[m['content'] for m in written]!r:.80} but the "
                f"tools returned {answers!r:.80}; leave the tools' messages out and rlvr writes them"
            )
        played += [{"role": "assistant", "content": turn}, *step.messages]
    if step is None:
        raise ConfigError(f"{where}: the trace has no assistant turn")
    if not step.done:
        raise ConfigError(f"{where}: the trace ends with a tool call; its last assistant turn gives the answer")
    return played, step


def written_traces(fn, ref: str, problems: list, reward, new_environment, max_turns: int) -> tuple[dict, dict]:
    """({problem id: trace}, stats) for the problems whose written trace grades `correct` under the task's verifier
    (through the environment's own grading where there is one); the others are dropped, counted in stats and named in
    one warning line on stderr."""
    written: list = []  # (problem, trace, its verdict or None: a text trace, graded with the others below)
    for p in problems:
        trace, where = _written(fn, ref, p), f"{KEY}={ref!r} on problem {p.id!r}"
        if isinstance(trace, list) and new_environment is None:
            raise ConfigError(
                f"{where} returned chat messages, but episode.environment is none: return the answer's text, or set "
                "episode.environment: tool and episode.tools"
            )
        if isinstance(trace, str):
            written.append((p, trace, None))
            continue
        env = new_environment()
        try:
            trace, step = play(env, p, trace, where, max_turns)
        finally:
            release([env])
        written.append((p, trace, getattr(step, "verdict", None) or reward([trace[-1]["content"]], [p]).verdicts[0]))
    # the text traces in one reward call: one worker pool for all of them (a call per trace started a pool per trace,
    # 35 ms each: 4832 traces of the default task took 160 s to grade)
    texts = [(p, t) for p, t, v in written if v is None]
    graded = iter(reward([t for _, t in texts], [p for p, _ in texts]).verdicts if texts else [])
    traces, dropped = {}, {}
    for p, trace, verdict in written:
        verdict = verdict or next(graded)
        if verdict.status == "correct":
            traces[p.id] = trace
        else:
            dropped[p.id] = f"{verdict.status}, read {verdict.extracted!r}"
    if dropped:
        first = next(iter(dropped.items()))
        print(
            f"WARNING: {KEY}={ref!r}: {len(dropped)} of {len(problems)} traces do not grade correct under the task's "
            f"verifier and are dropped (first: problem {first[0]!r}, {first[1]})",
            file=sys.stderr,
        )
    return traces, {"reference": ref, "reference_traces": len(problems), "reference_dropped": len(dropped)}


def written_for(c: Config, task, reward, problems: list) -> tuple[dict, dict] | None:
    """(traces, stats) of sft.reference on `problems` (written_traces), or None where a column gives the traces (or
    sft.source is samples). rlvr sft calls it before the run directory is made: a function that fails leaves none."""
    fn = reference_function(c, problems)
    if fn is None:
        return None
    make_env = environment_factory(c.episode, task, reward)
    return written_traces(fn, c.sft.reference, problems, reward, make_env, c.episode.max_turns)


__all__ = ["reference_function", "written_traces", "written_for", "play"]
