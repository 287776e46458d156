"""Episodes, token in and token out: the policy writes a turn, the environment answers, until it says done or a
limit is hit; what the update trains on is exactly the ids the sampler produced with the environment's ids spliced in
between (mask 1 on the policy's, 0 on the environment's). Nothing is decoded and re-tokenized.

The environment's messages become ids through the model's chat template, as the *suffix* that the conversation with
them adds to the conversation so far: render(messages + turn + env messages, generation prompt) minus
render(messages + turn). That is only sound when the template is append-only for this conversation (rendering more
messages never changes the text of the earlier ones); a template that is not (one that drops earlier reasoning, say)
is refused with `TemplateNotAppendOnly`, never silently re-rendered. A template that ignores `tools` gets the tools'
schemas in the system message instead (TOOLS_SYSTEM).

Shapes per episode: prompt_ids (the opening messages, generation prompt included), then ids / mask / sampler_logp of
equal length: every token after the prompt, the policy's and the environment's.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field

from rlvr.environments.protocol import Step
from rlvr.environments.stepping import Fault, take_step, take_steps

# How a template without tool support hears of the tools: appended to the system message (Hermes style).
TOOLS_SYSTEM = (
    '\n\nYou may call these tools; write a call as <tool_call>{{"name": ..., "arguments": {{...}}}}'
    "</tool_call> and wait for its result.\n<tools>\n{schemas}\n</tools>"
)
LIMITS = ("done", "turns", "tokens", "error", "timeout")


class TemplateNotAppendOnly(ValueError):
    """The chat template renders earlier messages differently once more follow: splicing would be unsound."""


@dataclass
class Episode:
    """One rollout as an episode. `status` "ok" or a fault ("error": the environment raised; "timeout": a step ran
    past its deadline; both excluded from the loss); `ended_by` one of LIMITS; `reward_parts` summed over turns;
    `tool_calls` counts by call status; `opened` how many of `messages` opened the episode (the rest are its turns
    and the environment's answers); `env_seconds` the time spent in the environment's steps."""

    problem: object
    prompt_ids: list[int]
    messages: list[dict]
    ids: list[int] = field(default_factory=list)
    mask: list[float] = field(default_factory=list)
    sampler_logp: list[float] = field(default_factory=list)
    turn_tokens: list[int] = field(default_factory=list)
    reward_parts: dict[str, float] = field(default_factory=dict)
    tool_calls: Counter = field(default_factory=Counter)
    status: str = "ok"
    ended_by: str | None = None
    detail: str = ""
    verdict: object = None  # the final answer's Verdict, where the environment grades one
    opened: int = 0
    env_seconds: float = 0.0

    @property
    def reward(self) -> float:
        return float(sum(self.reward_parts.values()))

    @property
    def policy_tokens(self) -> int:
        return int(sum(self.mask))


def template_kwargs(tokenizer, messages: list[dict], tools: dict) -> tuple[list[dict], dict]:
    """(messages, apply_chat_template's extra arguments) that show the tools to the policy: the template's own
    `tools` where it renders them, else the schemas in the system message. A tool call in the task's data is
    written as text where the template would drop it (rlvr.tasks.chat.for_template)."""
    from rlvr.tasks.chat import for_template

    messages = for_template(tokenizer, messages)
    if not tools:
        return messages, {}
    schemas = [t.schema for t in tools.values()]
    plain = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    if tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, tools=schemas) != plain:
        return messages, {"tools": schemas}
    block = TOOLS_SYSTEM.format(schemas="\n".join(json.dumps(s) for s in schemas))
    if messages and messages[0]["role"] == "system":
        return [{**messages[0], "content": messages[0]["content"] + block}, *messages[1:]], {}
    return [{"role": "system", "content": block.lstrip()}, *messages], {}


def _render(tokenizer, messages, extra, generation_prompt: bool) -> str:
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation_prompt, **extra)


def suffix_ids(
    tokenizer,
    messages: list[dict],
    turn: str,
    turn_stopped: bool,
    new_messages: list[dict],
    extra: dict,
    stop_text: str,
) -> list[int]:
    """The ids that follow the sampled turn: what closes it (when the sampler did not stop it), the environment's
    messages, and the next assistant header. Raises TemplateNotAppendOnly where splicing would be unsound."""
    before = _render(tokenizer, messages, extra, True)
    with_turn = _render(tokenizer, [*messages, {"role": "assistant", "content": turn}], extra, False)
    after = _render(tokenizer, [*messages, {"role": "assistant", "content": turn}, *new_messages], extra, True)
    if not (with_turn.startswith(before + turn) and after.startswith(with_turn)):
        raise TemplateNotAppendOnly(
            "the chat template renders the conversation so far differently once the "
            "environment's messages follow; rlvr splices ids only where it is append-only"
        )
    rest = after[len(before) + len(turn) :]
    if turn_stopped:  # the sampler's stop token already closed the turn
        if not rest.startswith(stop_text):
            raise TemplateNotAppendOnly(f"the template does not close an assistant turn with {stop_text!r}")
        rest = rest[len(stop_text) :]
    return tokenizer(rest, add_special_tokens=False)["input_ids"]


def _turn_messages(step: Step) -> list[dict]:
    return [m if isinstance(m, dict) else {"role": "user", "content": str(m)} for m in step.messages]


def open_episode(problem, opening: list[dict], tools: dict, tokenizer) -> tuple[Episode, dict]:
    """An episode whose prompt is `opening` encoded with the tools shown; (episode, template arguments)."""
    messages, extra = template_kwargs(tokenizer, list(opening), tools)
    prompt = tokenizer(_render(tokenizer, messages, extra, True), add_special_tokens=False)["input_ids"]
    return Episode(problem, prompt, messages, opened=len(messages)), extra


def start_episode(env, problem, tokenizer) -> tuple[Episode, dict]:
    """reset the environment and encode its opening messages (tools shown); (episode, template arguments)."""
    return open_episode(problem, env.reset(problem), getattr(env, "tools", {}) or {}, tokenizer)


def record_turn(ep: Episode, ids: list[int], logp: list[float], text: str) -> None:
    """The sampled turn, as the sampler produced it: mask 1."""
    ep.ids += ids
    ep.mask += [1.0] * len(ids)
    ep.sampler_logp += [float(x) for x in logp]
    ep.turn_tokens.append(len(ids))
    ep.messages.append({"role": "assistant", "content": text})


def apply_step(ep: Episode, outcome, seconds: float, tokenizer, extra: dict, text: str, stopped: bool, stop_text: str):
    """A step's outcome (take_step) into its episode: reward parts, tool counts, the verdict, and the environment's
    messages spliced in with mask 0. A fault ends the episode with status "error" / "timeout" (out of the loss).
    True while the episode goes on."""
    ep.env_seconds += seconds
    if isinstance(outcome, Fault):
        ep.status, ep.ended_by, ep.detail = outcome.status, outcome.status, outcome.detail
        return False
    for name, value in (outcome.reward_parts or {}).items():
        ep.reward_parts[name] = ep.reward_parts.get(name, 0.0) + float(value)
    for status in getattr(outcome, "tool_statuses", ()):
        ep.tool_calls[status] += 1
    ep.verdict = getattr(outcome, "verdict", None) or ep.verdict
    if outcome.done:
        ep.ended_by = "done"
        return False
    splice_answer(ep, tokenizer, extra, text, stopped, _turn_messages(outcome), stop_text)
    return True


def answer_turn(
    ep: Episode, env, tokenizer, extra: dict, text: str, stopped: bool, stop_text: str, step_timeout_s: float = 0.0
) -> bool:
    """One episode's environment step after its turn, taken and applied (take_step, apply_step); True while the
    episode goes on."""
    outcome, seconds = take_step(env, text, step_timeout_s)
    return apply_step(ep, outcome, seconds, tokenizer, extra, text, stopped, stop_text)


def splice_answer(ep: Episode, tokenizer, extra: dict, turn: str, stopped: bool, new: list[dict], stop_text: str):
    """The environment's messages after the episode's last turn, as the template's suffix ids (mask 0)."""
    env_ids = suffix_ids(tokenizer, ep.messages[:-1], turn, stopped, new, extra, stop_text)
    ep.ids += env_ids
    ep.mask += [0.0] * len(env_ids)
    ep.sampler_logp += [0.0] * len(env_ids)
    ep.messages += new


def replay_episode(tokenizer, opening: list[dict], turns: list[dict], tools: dict, stop_text: str | None = None):
    """A written episode as the ids a policy would have sampled: `opening` (the task's messages; tools shown as in
    run_episodes), then `turns` (assistant messages, each followed by the environment's messages). Each assistant
    turn is its text's ids plus the stop token (mask 1); the environment's messages are spliced in as the template's
    suffix (mask 0): the layout run_episodes makes, so a supervised baseline on reference traces trains on what an
    RL episode would. Raises ValueError where `turns` does not start with an assistant message."""
    stop_text = stop_text if stop_text is not None else tokenizer.eos_token
    (stop_id,) = tokenizer(stop_text, add_special_tokens=False)["input_ids"]
    ep, extra = open_episode(None, opening, tools, tokenizer)
    if not turns or turns[0]["role"] != "assistant":
        raise ValueError("a reference episode starts with the assistant's turn")
    for i, m in enumerate(turns):
        if m["role"] != "assistant":
            continue
        ids = tokenizer(m["content"], add_special_tokens=False)["input_ids"] + [stop_id]
        record_turn(ep, ids, [0.0] * len(ids), m["content"])
        answers = []
        for later in turns[i + 1 :]:
            if later["role"] == "assistant":
                break
            answers.append(later)
        if answers:
            splice_answer(ep, tokenizer, extra, m["content"], True, answers, stop_text)
    return ep


def sample_turn(sampler, prompts: list[list[int]], **kw):
    """One turn for each row. Rows that share their prompt in equal runs (a problem's G episodes at their first
    turn) are sampled as one prompt with n = G, so the sampler prefills it once; rows come back in the given order
    either way (the sampler's groups are prompt-major)."""
    runs: list[list] = []  # [prompt, how many rows in a row ask it]
    for p in prompts:
        if runs and runs[-1][0] == p:
            runs[-1][1] += 1
        else:
            runs.append([p, 1])
    sizes = {n for _, n in runs}
    if len(sizes) == 1 and len(runs) < len(prompts):
        return sampler.generate([p for p, _ in runs], sizes.pop(), **kw)
    return sampler.generate(prompts, 1, **kw)


@contextmanager
def continuing(sampler):
    """While episodes run, a sampler that can keeps each row's keys and values between turns, so a turn prefills only
    what the last one did not (the fast backend: rlvr.sampling.prefix_cache); dropped afterwards."""
    cache = getattr(sampler, "prefix", None)
    if cache is None:
        yield
        return
    cache.enabled = True
    try:
        yield
    finally:
        cache.enabled = False
        cache.clear()


def episode_limits(episode) -> dict:
    """run_episodes' limits from a config's episode section, so training and evaluation end episodes alike."""
    return {
        "max_turns": episode.max_turns,
        "max_total_tokens": episode.max_total_tokens,
        "step_timeout_s": episode.step_timeout_s,
        "step_workers": episode.step_workers,
    }


class Episodes(list):
    """run_episodes' episodes, in the order given, and `env_wall_s`: the wall time the rounds spent waiting for the
    environments' steps (under the episodes' summed env_seconds when steps ran side by side)."""

    env_wall_s: float = 0.0


def run_episodes(
    sampler,
    tokenizer,
    envs: list,
    problems: list,
    *,
    max_turns: int,
    max_total_tokens: int,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_p: float = 1.0,
    top_k: int = 0,
    generator=None,
    stop_text: str | None = None,
    step_timeout_s: float = 0.0,
    step_workers: int = 8,
) -> Episodes:
    """One episode per (environment, problem) pair, all advanced together: each round samples one turn for every
    episode still running (the prompt is exactly its ids so far: token in), records it (token out), and lets the
    environments answer (their steps side by side on up to `step_workers` threads). Limits: `max_turns` policy
    turns, `max_total_tokens` ids after the prompt."""
    stop_text = stop_text if stop_text is not None else tokenizer.eos_token
    sampling = dict(
        max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p, top_k=top_k, generator=generator
    )
    steps = dict(stop_text=stop_text, step_timeout_s=step_timeout_s, workers=step_workers)
    with continuing(sampler):
        episodes = _advance(sampler, tokenizer, envs, problems, max_turns, max_total_tokens, sampling, steps)
    release(envs)
    return episodes


def _advance(sampler, tokenizer, envs, problems, max_turns, max_total_tokens, sampling, steps) -> Episodes:
    """run_episodes' rounds: every live episode one turn a round, until each is done or out of turns or tokens."""
    started = [start_episode(env, p, tokenizer) for env, p in zip(envs, problems)]
    episodes = Episodes(ep for ep, _ in started)
    live = list(range(len(episodes)))
    for _turn in range(max_turns):
        if not live:
            break
        budgets = [max_total_tokens - len(episodes[i].ids) for i in live]
        turn_sampling = {**sampling, "max_new_tokens": max(1, min(sampling["max_new_tokens"], min(budgets)))}
        ro = sample_turn(sampler, [episodes[i].prompt_ids + episodes[i].ids for i in live], **turn_sampling)
        for row, i in enumerate(live):
            n = int(ro.mask[row].sum())
            record_turn(
                episodes[i], ro.completion_ids[row, :n].tolist(), ro.sampler_logp[row, :n].tolist(), ro.texts[row]
            )
        t0 = time.perf_counter()
        outcomes = take_steps([envs[i] for i in live], ro.texts, steps["step_timeout_s"], steps["workers"])
        episodes.env_wall_s += time.perf_counter() - t0
        still = []
        for row, i in enumerate(live):
            ep, (outcome, seconds) = episodes[i], outcomes[row]
            stopped = ro.finish[row] == "stop"
            going = apply_step(
                ep, outcome, seconds, tokenizer, started[i][1], ro.texts[row], stopped, steps["stop_text"]
            )
            if going and len(ep.ids) >= max_total_tokens:
                ep.ended_by, going = "tokens", False
            if going:
                still.append(i)
        live = still
    for i in live:
        episodes[i].ended_by = "turns"
    return episodes


def release(envs) -> None:
    """Close each environment that holds resources (an event loop, a session): the protocol's optional close()."""
    for env in envs:
        if callable(getattr(env, "close", None)):
            env.close()


__all__ = [
    "Episode",
    "TemplateNotAppendOnly",
    "TOOLS_SYSTEM",
    "LIMITS",
    "template_kwargs",
    "suffix_ids",
    "run_episodes",
    "episode_limits",
    "replay_episode",
    "sample_turn",
    "open_episode",
    "start_episode",
    "splice_answer",
    "record_turn",
    "answer_turn",
    "apply_step",
    "Episodes",
    "continuing",
]
