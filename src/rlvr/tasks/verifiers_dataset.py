"""A `verifiers` environment's own data as an rlvr task (`task.name: verifiers`; settings `env`: an installed
environment's id, loaded by `verifiers.load_environment(env, **args)`, or `package.module:attr` naming a
vf.Environment or a function that returns one, called with `args`).

Its dataset's rows are the train problems and its eval_dataset's the held-out ones. An environment without an
eval_dataset has its rows split by the hash of their ids (rlvr.tasks.arithmetic.split_of), so that no held-out row
is ever trained on (verifiers itself falls back to the training rows there). A problem keeps its row
(meta["row"]: prompt, answer, info, task, example_id) for the environment's rollout; its chat is the row's prompt.
`limit` (> 0) keeps the first so many rows of each dataset. The verifiers package (0.2 API, verifiers>=0.2.1,<0.3) is
imported only here and in rlvr.environments.verifiers_env: extra rlvr[verifiers]. A verifiers without that API (0.4's
verifiers.v1) is refused in one line naming the installed version, the range to install and why (import_verifiers).
"""

from __future__ import annotations

import hashlib
import json
from importlib import metadata

from rlvr.errors import ConfigError
from rlvr.registry import is_plugin, load_attr
from rlvr.tasks.arithmetic import split_of
from rlvr.tasks.base import Problem, ProblemSetTask

# The range rlvr runs (the extra rlvr[verifiers] in pyproject.toml pins the same): the 0.2 API.
SUPPORTED = ">=0.2.1,<0.3"


def import_verifiers():
    """The verifiers package, if it has the 0.2 API rlvr runs; ConfigError in one line otherwise."""
    try:
        import verifiers
    except ImportError:
        raise ConfigError(
            "a verifiers environment needs the verifiers package: pip install 'rlvr[verifiers]'"
        ) from None
    if not hasattr(verifiers, "MultiTurnEnv"):  # the 0.2 API's base class; 0.4 has only verifiers.v1 under it
        raise ConfigError(unsupported_message(installed_version(verifiers)))
    return verifiers


def installed_version(verifiers) -> str:
    """The installed distribution's version (what pip reports), else the module's own __version__."""
    try:
        return metadata.version("verifiers")
    except metadata.PackageNotFoundError:
        return getattr(verifiers, "__version__", "of unknown version")


def unsupported_message(version: str) -> str:
    # Why 0.4 is not run (read from verifiers 0.4.0's source): rlvr plays the model in process, one policy turn per
    # episode step, through a vf.Client the 0.2 rollout awaits. 0.4's episode instead launches a harness program
    # (even its plain chat loop, harness `null`, is a PEP 723 script that `uv sync` installs) which asks an HTTP
    # interception server for every model turn, so rlvr would need its sampler behind such an endpoint first.
    return (
        f"verifiers {version} is installed, but rlvr runs environments of the verifiers 0.2 API "
        f"(vf.SingleTurnEnv, vf.MultiTurnEnv, vf.ToolEnv), verifiers{SUPPORTED}: "
        f"pip install 'verifiers{SUPPORTED}' (the pin of rlvr[verifiers]). Not supported yet: verifiers 0.4's API "
        "(verifiers.v1: Env, Taskset, Harness) runs each episode's chat loop as a separate program, installed by uv, "
        "that asks an HTTP endpoint for every model turn, and rlvr's sampler serves no such endpoint turn by turn"
    )


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


__all__ = [
    "SUPPORTED",
    "VerifiersTask",
    "content_text",
    "import_verifiers",
    "installed_version",
    "load_vf_environment",
    "row_problem",
    "unsupported_message",
]
