"""One run lifecycle for every recipe (the RL loop, SFT, the main job's phases): start-up and save-out.

    opened = open_run(cfg, output_dir, resume=..., overwrite=..., policy=policy)   # checks first, then the run directory
    with StopFlag() as stop: ... recipe's loop, checkpointing on stop ...
    save_final(opened.run, model, tokenizer, cfg, task, steps)

Start-up, in the order that loses nothing: an unusable output directory and a model that cannot load are refused
before anything is written; a tracker that is not installed too; then the run directory and its config.yaml (on a
resume: the same config, or --allow-config-change); then the trackers, replaying what they lack. Save-out: the
adapter and the merged model in final/, then what makes them travel (prompt template, tokenizer, model card).
Under data parallel only rank 0 holds the run directory and the trackers (`run` is None elsewhere).
"""

from __future__ import annotations

import json
import shutil
import signal
from dataclasses import dataclass
from pathlib import Path

from rlvr.config import DEFAULTS, REGISTERED, REGISTERED_WHERE, Config, ConfigError, check_name, dump
from rlvr.environments.build import ENVIRONMENTS, TOOLS, episodes_of, takes_tools
from rlvr.environments.calls import TOOL_CALL_PARSERS
from rlvr.policy.load import base_model, model_origin, resolve_model_path, save_policy
from rlvr.prompts.chat import prompt_format
from rlvr.rundir import checkpoint as ckpt
from rlvr.rundir import fsdp
from rlvr.rundir.files import RunDir, check_output_dir, read_jsonl
from rlvr.rundir.final import write_final
from rlvr.rundir.trackers import TRACKERS, Trackers, check_trackers, resume_point, run_name
from rlvr.sampling import BACKENDS
from rlvr.verifiers.controls import CONTROLS
from rlvr.yaml_io import lookup

# the registries whose names config keys give (rlvr.config.REGISTERED: key -> the registry's `what`)
KEYED_REGISTRIES = {r.what: r for r in (CONTROLS, BACKENDS, ENVIRONMENTS, TOOLS, TOOL_CALL_PARSERS, TRACKERS)}


class StopFlag:
    """Ctrl-C / SIGTERM ask the recipe to finish the step in flight, checkpoint and exit (130 / 143)."""

    def __init__(self):
        self.signum = None

    def __enter__(self):
        self._old = {s: signal.signal(s, self._set) for s in (signal.SIGINT, signal.SIGTERM)}
        return self

    def _set(self, signum, _frame):
        if self.signum is not None:  # a second Ctrl-C: stop now
            raise KeyboardInterrupt
        self.signum = signum

    def __exit__(self, *exc):
        for s, h in self._old.items():
            signal.signal(s, h)


@dataclass
class OpenedRun:
    """What start-up gives a recipe: its folder, the run directory (rank 0; None elsewhere), the trackers and, on a
    resume, the newest complete checkpoint (None: start from step 0)."""

    path: Path
    run: RunDir | None
    trackers: Trackers
    resume_from: Path | None


def registered_names(key: str) -> list[str]:
    """The names a registry-backed config key takes: its registry's, or those of its entries whose attribute
    REGISTERED_WHERE[key] is true (eval.controls: CONTROLS' control runs, not none)."""
    where = REGISTERED_WHERE.get(key)
    entries = KEYED_REGISTRIES[REGISTERED[key]].entries()
    return [e.name for e in entries if where is None or getattr(e.value, where)]


def check_registered(cfg: Config) -> Config:
    """The config's names of registry entries (rollout.backend, reward.control, episode.environment, episode.tools,
    episode.call_format, log.report_to, eval.controls), each a registered name or package.module:attr, refused in the config's
    wording with the registry's names; then episode.tools, offered only by an environment that takes them (the tool
    environment; a plug-in may read them too): elsewhere a run would train without them and say nothing. rlvr.config checks keys
    and types as it reads a file but cannot see the registries (later packages); every entry point calls this before
    a task, a model or a run directory: check_components and configured_reward (train, sft, serve), the main job's
    start-up, rlvr eval."""
    values = cfg.to_dict()
    for key in REGISTERED:
        check_name(key, lookup(values, key)[1], registered_names(key))
    tools, env = cfg.episode.tools, cfg.episode.environment
    if tools and not takes_tools(env):
        raise ConfigError(
            f"episode.tools = {tools} but episode.environment is {env!r}, which offers no tools; set "
            f"episode.environment: tool to train with them, or episode.tools: [] to train without"
        )
    return cfg


def open_run(
    cfg: Config,
    output_dir: str,
    *,
    resume: bool = False,
    overwrite: bool = False,
    allow_config_change: bool = False,
    policy=None,
    is_main: bool = True,
) -> OpenedRun:
    """Start-up shared by every recipe; `cfg` is the resolved config the run runs with and records (config.yaml, the
    trackers)."""
    path = Path(output_dir)
    if policy is None:  # a hub id the hub cannot give stops here (exit 2), before a run directory exists
        if is_main:  # but an unusable one first. Rank 0 alone: the folder is its to make, and another rank
            # checking it raced rank 0's lock (a second node was refused: "in use by a running rlvr process")
            check_output_dir(output_dir, resume=resume, overwrite=overwrite)
        resolve_model_path(cfg.model.name)
    check_prompt_format(cfg, policy[1] if policy is not None else None)  # a chat format of a base model, likewise
    run, trackers = None, Trackers([], None)
    if is_main:
        check_trackers(cfg.log.report_to, path, cfg.log.project)  # a missing extra: before anything is written
        run = RunDir(output_dir, resume=resume, overwrite=overwrite)
        check_config(run, cfg, resume, allow_config_change)
    resume_from = ckpt.latest_complete(path / "checkpoints") if resume else None
    if run is not None:  # rank 0's
        trackers = open_trackers(run, cfg, resume, resume_from)
    return OpenedRun(path, run, trackers, resume_from)


def check_prompt_format(cfg: Config, tokenizer=None) -> None:
    """Refuse, in one line and before any run directory, a model.prompt_format the model cannot take: chat of a
    tokenizer without a chat template, episodes in the plain format (rlvr.prompts.chat.prompt_format). The tokenizer
    is read from the model's folder (no weights) unless given, and only where a refusal is possible."""
    episodes = episodes_of(cfg.episode)
    if cfg.model.prompt_format != "chat" and not episodes:
        return  # auto and plain take any tokenizer for single-turn prompts
    if tokenizer is None:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(resolve_model_path(cfg.model.name))
    prompt_format(cfg.model.prompt_format, tokenizer, cfg.model.name, episodes)


def open_trackers(run: RunDir, cfg: Config, resume: bool, resume_from: Path | None) -> Trackers:
    """The trackers of log.report_to, started before any step; on a resume they get the steps before the
    checkpoint they lack. A fresh run whose trackers cannot start leaves no run directory behind."""
    start = json.loads((resume_from / "loop_state.json").read_text())["step"] if resume_from else 0
    try:
        return Trackers.open(
            cfg.log.report_to,
            run.path,
            project=cfg.log.project,
            run_name=run_name(cfg.log, run.path),
            config=cfg.to_dict(),
            resume=resume_point(run.path, start) if resume else None,
        )
    except ConfigError:
        if not resume:
            shutil.rmtree(run.path, ignore_errors=True)
        raise


def check_config(run: RunDir, cfg: Config, resume: bool, allow_change: bool) -> None:
    """config.yaml written; on a resume it must equal the saved one unless the change is allowed."""
    import yaml

    path = run.path / "config.yaml"
    if resume:
        saved = yaml.safe_load(path.read_text())
        # the output directory is the run's place, not its settings: a run moved or named by another path resumes
        changed = [k for k in changed_settings(saved, cfg.to_dict()) if k != "output_dir"]
        if changed and not allow_change:
            raise ConfigError(
                f"--resume: config differs from the saved run in {', '.join(changed)}; "
                f"pass --allow-config-change to accept"
            )
    run.write_config(dump(cfg.to_dict()))


def config_diff(a, b, prefix=""):
    """The dotted keys (train.lr, reward.terms) whose values differ between two nested config dicts."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in set(a) | set(b):
            yield from config_diff(a.get(k), b.get(k), f"{prefix}{k}.")
    elif a != b:
        yield prefix[:-1]


def changed_settings(saved: dict, cfg: dict) -> list[str]:
    """config_diff(saved, cfg) less what changes nothing: a key the saved config predates, now at its default (rlvr
    added it since: a run made before it still resumes), and episode.tools while neither side's environment takes
    them (tools no episode offers; a no_tools control recorded its preset's)."""
    changed = [k for k in config_diff(saved, cfg) if lookup(saved, k)[0] or lookup(DEFAULTS, k) != lookup(cfg, k)]
    if "episode.tools" in changed:
        envs = {lookup(saved, "episode.environment")[1], lookup(cfg, "episode.environment")[1]}
        if not any(isinstance(env, str) and takes_tools(env) for env in envs):
            changed.remove("episode.tools")
    return sorted(changed)


def resume_step(run: RunDir | None, saved: dict | None) -> int:
    """The step a resume continues from (0 without a checkpoint); rank 0 drops the log lines after it, and says how
    many recorded steps are redone: all of them when the run was killed before its first checkpoint."""
    step = saved["step"] if saved else 0
    if run is not None:
        redone = {r.get("step") for r in read_jsonl(run.metrics_path, skip_torn=True) if r.get("step", 0) >= step}
        if redone and saved is None:
            print(
                f"--resume: no checkpoint in {run.path / 'checkpoints'}; training again from step 0 loses the "
                f"{_steps(len(redone))} recorded in metrics.jsonl (log.checkpoint_every and log.checkpoint_minutes "
                f"set how often a run saves)"
            )
        elif redone:
            print(f"--resume: from checkpoint step-{step}; redoing the {_steps(len(redone))} recorded after it")
        run.truncate_after(step - 1)
    return step


def _steps(n: int) -> str:
    return f"{n} step" if n == 1 else f"{n} steps"


def checkpoint_due(steps_done: int, log, since_s: float) -> bool:
    """Whether a recipe saves a checkpoint after `steps_done` steps, the last one saved `since_s` seconds ago: every
    log.checkpoint_every steps, or once log.checkpoint_minutes have passed (each 0 = off), so that a kill costs minutes
    of work even where steps are long or the run is shorter than checkpoint_every."""
    every, minutes = log.checkpoint_every, log.checkpoint_minutes
    return bool(every and steps_done % every == 0) or bool(minutes and since_s >= 60 * minutes)


class TrainingAborted(RuntimeError):
    """The run stopped on purpose (repeated non-finite losses); the last checkpoint is intact."""


class RunStopped(SystemExit):
    """A signal stopped the run after its checkpoint; exit code 130 (SIGINT) or 143 (SIGTERM). `run_path` and `step`
    let the command line print the whole command that resumes it (rlvr.cli); `is_main`: the rank that says so."""

    def __init__(self, code: int, run_path: Path, step: int, is_main: bool = True):
        super().__init__(code)
        self.exit_code = code  # SystemExit's `code` may be anything; this one is an int
        self.run_path, self.step, self.is_main = Path(run_path), step, is_main


def exit_on_signal(signum: int, step: int, run_path: Path, comm=None) -> None:
    """Raise RunStopped after saying where the checkpoint is (rank 0); every rank leaves together."""
    if comm is not None:
        comm.barrier()
    is_main = comm is None or comm.is_main
    if is_main:
        print(f"stopped by signal at step {step}; checkpoint saved: {Path(run_path) / 'checkpoints' / f'step-{step}'}")
    raise RunStopped(130 if signum == signal.SIGINT else 143, run_path, step, is_main)


def save_final(
    run: RunDir | None, model, tokenizer, c: Config, task, steps: int, *, comm=None, kind: str = "RLVR"
) -> None:
    """final/: the adapter and the merged model, then what makes them travel (the prompt template, the faithful
    tokenizer, the model card: rlvr.rundir.final). Under FSDP every rank gathers, rank 0 writes."""
    is_main = comm is None or comm.is_main
    final = run.path / "final" if run is not None else None  # rank 0 holds the run directory
    if comm is not None and comm.sharded:
        fsdp.save_policy(model, tokenizer, final, is_main=is_main, save_dtype=c.model.save_dtype)
    elif is_main and final is not None:
        save_policy(model, tokenizer, final, save_dtype=c.model.save_dtype, merged=c.model.save_merged)
    if is_main and final is not None:
        base, loaded_from = model_origin(model, c.model.name)
        local = getattr(getattr(base_model(model), "config", None), "_name_or_path", None)  # the folder it loaded
        write_final(final, c, tokenizer, task, steps, base, loaded_from, kind=kind, local_base=local)
    if comm is not None:
        comm.barrier()


__all__ = [
    "StopFlag",
    "OpenedRun",
    "open_run",
    "check_prompt_format",
    "registered_names",
    "check_registered",
    "open_trackers",
    "check_config",
    "config_diff",
    "changed_settings",
    "resume_step",
    "checkpoint_due",
    "RunStopped",
    "TrainingAborted",
    "exit_on_signal",
    "save_final",
]
