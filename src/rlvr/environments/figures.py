"""What an episode reports, shared by training and evaluation: its verdict (the environment's graded answer, or the
fault, or no_answer when a limit ended it first), its transcript, the episode/* figures of a batch of episodes, and
the fields samples.jsonl adds for one."""

from __future__ import annotations

from collections import Counter

from rlvr.environments.episode import LIMITS
from rlvr.verifiers.base import Verdict


def episode_verdict(ep) -> Verdict:
    """The verdict a row reports: the environment's graded answer, error for an episode the environment broke or hung
    (its fault, not the policy's: rlvr.verifiers.base.FAULT_STATUSES), else no_answer."""
    if ep.status in ("error", "timeout"):
        return Verdict("error", 0.0, None, f"environment {ep.status}: {ep.detail}")
    return ep.verdict if ep.verdict is not None else Verdict("no_answer", 0.0, None, f"ended by {ep.ended_by}")


def transcript(ep) -> str:
    """The episode after its opening, one message a paragraph, roles named: what samples.jsonl and the trackers show."""
    return "\n\n".join(f"[{m['role']}] {m['content']}" for m in ep.messages[ep.opened :])


def episode_metrics(episodes: list) -> dict:
    """episode/* figures of a step: turns and tool calls per episode, the tool-call outcome fractions, environment
    seconds per episode, the share ended by each limit, the policy's share of the episodes' ids, and the share
    solved by each turn (correct_by_turn_k: accuracy by attempt under `retry`)."""
    n = max(len(episodes), 1)
    calls: Counter[str] = Counter()
    for ep in episodes:
        calls.update(ep.tool_calls)
    n_calls = sum(calls.values())
    out = {
        "episode/turns": sum(len(ep.turn_tokens) for ep in episodes) / n,
        "episode/tool_calls": n_calls / n,
        "episode/tool_error_frac": (n_calls - calls["ok"]) / n_calls if n_calls else 0.0,
        "episode/parse_error_frac": calls["parse_error"] / n_calls if n_calls else 0.0,
        "episode/env_s": sum(ep.env_seconds for ep in episodes) / n,
        "episode/policy_token_frac": sum(ep.policy_tokens for ep in episodes)
        / max(sum(len(ep.ids) for ep in episodes), 1),
        "episode/tool_use_frac": sum(1 for ep in episodes if sum(ep.tool_calls.values())) / n,
    }
    for limit in LIMITS:
        out[f"episode/ended_by_{limit}_frac"] = sum(ep.ended_by == limit for ep in episodes) / n
    # accuracy by turn: the share of episodes whose answer was graded correct by their k-th policy turn (with the
    # retry environment, the k-th attempt), k up to the longest episode
    solved = [len(ep.turn_tokens) for ep in episodes if episode_verdict(ep).status == "correct"]
    for k in range(1, max([len(ep.turn_tokens) for ep in episodes] + [0]) + 1):
        out[f"episode/correct_by_turn_{k}"] = sum(t <= k for t in solved) / n
    return out


def episode_sample(ep) -> dict:
    """What samples.jsonl adds for an episode: its messages, per-turn token counts, tool calls by outcome, limits."""
    return {
        "messages": ep.messages,
        "turn_tokens": ep.turn_tokens,
        "tool_calls": dict(ep.tool_calls),
        "ended_by": ep.ended_by,
        "episode_status": ep.status,
        "reward_parts": ep.reward_parts,
    }


__all__ = ["episode_verdict", "transcript", "episode_metrics", "episode_sample"]
