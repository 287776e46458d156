"""A `verifiers` environment's own data as an rlvr task (`task.name: verifiers`; settings `env`: an installed
environment's id, loaded by `verifiers.load_environment(env, **args)`, or `package.module:attr` naming a
vf.Environment or a function that returns one, called with `args`).

Its dataset's rows are the train problems and its eval_dataset's the held-out ones. An environment without an
eval_dataset has its rows split by the hash of their ids (rlvr.tasks.arithmetic.split_of), so that no held-out row
is ever trained on (verifiers itself falls back to the training rows there). A problem keeps its row
(meta["row"]: prompt, answer, info, task, example_id) for the environment's rollout; its chat is the row's prompt.
`limit` (> 0) keeps the first so many rows of each dataset. The verifiers package (0.2 API) is imported only here
and in rlvr.environments.verifiers_env: extra rlvr[verifiers].
"""

from __future__ import annotations

import hashlib
import json

from rlvr.errors import ConfigError
from rlvr.registry import is_plugin, load_attr
from rlvr.tasks.arithmetic import split_of
from rlvr.tasks.base import Problem, ProblemSetTask


def import_verifiers():
    try:
        import verifiers
    except ImportError:
        raise ConfigError(
            "a verifiers environment needs the verifiers package: pip install 'rlvr[verifiers]'"
        ) from None
    if not hasattr(verifiers, "MultiTurnEnv"):  # 0.3 moved this API to verifiers.legacy, 0.4 replaced it
        raise ConfigError(
            f"verifiers {getattr(verifiers, '__version__', '?')} has no vf.MultiTurnEnv; rlvr supports the 0.2 API "
            "(pip install 'verifiers>=0.2.1,<0.3')"
        )
    return verifiers


def load_vf_environment(env: str, args: dict):
    """The vf.Environment that `env` names: a package.module:attr (an instance, or a function called with args) or
    an installed environment's id (vf.load_environment); ConfigError in one line otherwise."""
    vf = import_verifiers()
    try:
        if is_plugin(env):
            obj = load_attr(env, "task.settings.env")
            obj = obj if isinstance(obj, vf.Environment) else obj(**args)
        else:
            obj = vf.load_environment(env, **args)
    except ConfigError:
        raise
    except Exception as e:
        raise ConfigError(f"task.settings.env={env!r}: {type(e).__name__}: {e}") from None
    if not isinstance(obj, vf.MultiTurnEnv):
        raise ConfigError(
            f"task.settings.env={env!r} gave {type(obj).__name__}, not a vf.MultiTurnEnv (SingleTurnEnv, ToolEnv, ...)"
        )
    return obj


def content_text(content) -> str:
    """A message's content as text: a string as it is, content parts (dicts in a dataset row, pydantic objects in
    verifiers' messages) joined by their text."""
    if isinstance(content, str):
        return content
    parts = [part.get("text") if isinstance(part, dict) else getattr(part, "text", None) for part in content or []]
    return "".join(p or "" for p in parts)


def row_problem(row: dict, source: str) -> Problem:
    """A dataset row (its prompt already chat messages, as verifiers formats it) as a Problem."""
    messages = [{"role": m["role"], "content": content_text(m.get("content"))} for m in row["prompt"]]
    key = json.dumps([messages, row.get("answer"), row.get("info")], sort_keys=True, default=str)
    users = [m["content"] for m in messages if m["role"] == "user"]
    answer = row.get("answer")
    return Problem(
        id=f"{source}-{hashlib.sha256(key.encode()).hexdigest()[:16]}",
        prompt=users[-1] if users else messages[-1]["content"],
        answer=None if answer in (None, "") else str(answer),
        band=str(row.get("task") or "all"),
        meta={"messages": messages, "row": dict(row)},
    )


class VerifiersTask(ProblemSetTask):
    """A verifiers environment's problems; `vf_env` is the environment (rlvr.environments.verifiers_env runs it)."""

    def __init__(self, env: str, args: dict | None = None, limit: int = 0):
        self.vf_env = load_vf_environment(env, dict(args or {}))
        source = (self.vf_env.env_id or type(self.vf_env).__name__).replace("/", "-")
        train = [row_problem(r, source) for r in _rows(self.vf_env.get_dataset, limit)]
        if self.vf_env.eval_dataset is not None or getattr(self.vf_env, "eval_dataset_source", None) is not None:
            splits = {
                "train": train,
                "heldout": [row_problem(r, source) for r in _rows(self.vf_env.get_eval_dataset, limit)],
            }
        else:
            splits = {"train": [], "validation": [], "heldout": []}
            for p in train:
                splits[split_of(p.id)].append(p)
        super().__init__("verifiers", splits, system_prompt="")


def _rows(get, limit: int) -> list[dict]:
    try:
        dataset = get(n=limit if limit > 0 else -1)
    except ValueError:  # "dataset is not set"
        return []
    return [dict(r) for r in dataset]


__all__ = ["VerifiersTask", "load_vf_environment", "import_verifiers", "row_problem", "content_text"]
