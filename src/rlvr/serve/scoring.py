"""The served scorers and the bounded queue in front of them.

A scorer is what training grades with: a task's Reward (rlvr.verifiers.compose.task_reward: its grader, answer
form, answer format and every weighted term), a run's Reward built from its config as training builds it (its task
settings and reward section: `--config FILE`, `--run DIR`), or one verifier kind as a one-term Reward. Its terms score through
the same worker pool with per-item deadlines (rlvr.verifiers.pool) and, for code, the same sandbox as training;
a worker killed mid-item gives that item `error` and is replaced, so the service goes on. Where training opens a
pool per batch, the service keeps one per term for its lifetime (`keep_pools`): a request of a few items would
otherwise pay for forking the workers.

`Scheduler` admits a request's items only while the items waiting or being scored stay under `max_queue_items`
(else 429 with a Retry-After from the recent scoring rate: memory stays bounded, the client backs off). One thread
per scorer takes the queued jobs, joins jobs that wait together into one batch (up to `max_batch_items`), scores
it with one Reward call and hands each job its verdicts, in order.
"""

from __future__ import annotations

import math
import queue
import sys
import threading
import time
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, replace
from pathlib import Path

from rlvr.config import DEFAULTS, Config, ConfigError, reward_config
from rlvr.environments.build import episodic
from rlvr.serve.items import BadRequest
from rlvr.tasks.base import DatasetError
from rlvr.verifiers.base import Verdict
from rlvr.verifiers.compose import Reward, build_reward, task_reward
from rlvr.verifiers.controls import CONTROLS
from rlvr.verifiers.registry import KINDS, runs_tests

DEFAULT_POOL = {"workers": DEFAULTS["reward"]["workers"], "timeout_s": DEFAULTS["reward"]["timeout_s"]}


@dataclass
class Scorer:
    """name: "task:NAME" or "verifier:KIND"; task: the task object (its row reader) or None."""

    name: str
    reward: Reward
    task: object = None

    @property
    def runs_code(self) -> bool:
        return any(runs_tests(t.kind) for t in self.reward.terms)


def build_scorers(
    sources: list[tuple[str, str]],
    settings: dict | None = None,
    task_settings: dict | None = None,
    workers: int | None = None,
    timeout_s: float | None = None,
) -> dict[str, Scorer]:
    """The served scorers in the order given: the first is what items naming none get. A source is ("task", NAME),
    ("verifier", KIND), ("config", FILE or preset) or ("run", RUN_DIR). `settings` go to the verifier kinds,
    `task_settings` to every task named; `workers` / `timeout_s` (None: the config's reward section, else its
    defaults) to every term's pool. Mistakes raise ConfigError (DatasetError for unreadable data)."""
    settings, task_settings = settings or {}, task_settings or {}
    flags = {flag for flag, _ in sources}
    if settings and "verifier" not in flags:
        raise ConfigError(
            f"--set {next(iter(settings))}: a setting of the --verifier kinds, and none is given (a task's "
            f"settings are --set task.settings.KEY=VALUE)"
        )
    if task_settings and "task" not in flags:
        raise ConfigError(
            f"--set task.settings.{next(iter(task_settings))}: applies to --task NAME, and none is given (a "
            f"--config or --run carries its own task settings)"
        )
    pool = {k: v for k, v in (("workers", workers), ("timeout_s", timeout_s)) if v is not None}
    out, given = dict[str, Scorer](), dict[str, str]()
    for flag, value in sources:
        if flag == "verifier":
            scorer = verifier_scorer(value, settings, {**DEFAULT_POOL, **pool})
        elif flag == "task":
            scorer = task_scorer(value, task_settings, {**DEFAULT_POOL, **pool})
        else:
            scorer = config_scorer(flag, value, pool)
        if scorer.name in out:
            raise ConfigError(
                f"--{flag} {value}: serves {scorer.name}, as --{given[scorer.name]} already does; one scorer per "
                f"name here (serve the other on another port)"
            )
        out[scorer.name], given[scorer.name] = scorer, f"{flag} {value}"
    return out


def verifier_scorer(kind: str, settings: dict, pool: dict) -> Scorer:
    """One verifier kind as a one-term Reward."""
    KINDS.get(kind, "--verifier")
    term = {"name": kind, "kind": kind, "weight": 1.0, **settings}
    return Scorer(f"verifier:{kind}", build_reward(reward_config({"terms": [term], **pool})))


def task_scorer(name: str, task_settings: dict, pool: dict) -> Scorer:
    """A task's grader with the default reward section, as `rlvr verify --task` and a run with no reward terms grade
    it; the task built from `task_settings` (a jsonl task's file and answer form decide its grader)."""
    from rlvr.tasks import TASKS, load_task

    TASKS.get(name, "--task")  # an unknown name, named as the flag that gave it
    try:
        task = load_task(name, **task_settings)
    except (ConfigError, DatasetError):
        raise
    except ValueError as e:  # a task's own refusal of its settings (jsonl without a file): a start-up mistake
        raise ConfigError(
            f"--task {name}: {e}; give it as --set task.settings.KEY=VALUE, or serve a run's grading with "
            f"--config FILE / --run DIR"
        ) from None
    return Scorer(f"task:{name}", task_reward(reward_config(pool), task)[1], task)


def config_scorer(flag: str, source: str, pool: dict) -> Scorer:
    """The reward a run's config grades with, built as training builds it (rlvr.training.step.configured_reward): its
    task with its settings, its reward section resolved against the task. `flag` "config": a YAML file or preset as
    `rlvr train` takes it; "run": a run directory's resolved config.yaml. `pool` overrides reward.workers /
    reward.timeout_s."""
    from rlvr.config import as_config, resolve
    from rlvr.training.step import configured_reward  # lazy: the training package (torch) only when asked for

    path = Path(source) / "config.yaml" if flag == "run" else source
    if flag == "run" and not Path(path).is_file():
        raise ConfigError(f"--run {source}: not a run directory (no config.yaml there)")
    try:
        cfg = as_config(resolve(str(path)))
        cfg = replace(cfg, reward=replace(cfg.reward, **pool))
        task, _, reward = configured_reward(cfg)
        notes = config_notes(cfg)  # a plug-in environment is imported to ask it: its failure names the source too
    except (ConfigError, DatasetError) as e:
        raise type(e)(f"--{flag} {source}: {e}") from None
    for line in notes:
        print(f"rlvr serve: --{flag} {source}: {line}", file=sys.stderr)
    return Scorer(f"task:{cfg.task.name}", reward, task)


def config_notes(cfg: Config) -> list[str]:
    """What the service grades differently from the run: it scores one completion with the run's real reward."""
    notes = []
    if CONTROLS.get(cfg.reward.control).wraps:
        notes.append(
            f"reward.control {cfg.reward.control} is a control run's stand-in reward; served: the real reward "
            f"its verdicts come from"
        )
    if episodic(cfg.episode):
        notes.append(
            f"its rollouts are episodes (episode.environment {cfg.episode.environment}); served: one "
            f"completion graded by the task's reward, without the environment"
        )
    return notes


def keep_pools(reward: Reward) -> None:
    """Give each term that scores in worker processes a pool kept across batches: the same VerifierPool (per-item
    deadlines, a dead worker's item `error`) training uses, without forking the workers again for every request."""
    from rlvr.verifiers.pool import VerifierPool

    for term in reward.terms:
        if term.workers > 0 and term.engine == "local" and not callable(getattr(term.verifier, "score_many", None)):
            term.pool = VerifierPool(term.verifier, workers=term.workers, timeout_s=term.timeout_s)


def close_pools(reward: Reward) -> None:
    for term in reward.terms:
        if term.pool is not None:
            term.pool.close()
            term.pool = None


def score_jobs(reward: Reward, completions: list, problems: list) -> list[dict]:
    """One Reward call -> one answer per item: status, reward (the weighted total), extracted, detail, terms. A
    failure of the call itself gives every item `error` rather than an exception."""
    try:
        result = reward(completions, problems)
    except Exception as e:  # noqa: BLE001 - the service answers every item; a fault is a verdict
        v = Verdict("error", 0.0, None, f"scoring failed: {type(e).__name__}: {e}"[:300])
        return [{**verdict_fields(v), "reward": 0.0, "terms": {}} for _ in completions]
    return [
        {**verdict_fields(v), "reward": total, "terms": {name: vals[i] for name, vals in result.terms.items()}}
        for i, (v, total) in enumerate(zip(result.verdicts, result.total))
    ]


def verdict_fields(v: Verdict) -> dict:
    return {"status": v.status, "extracted": v.extracted, "detail": v.detail}


class Job:
    """One request's items for one scorer, and the future its answers arrive on."""

    def __init__(self, completions: list, problems: list):
        self.completions, self.problems = completions, problems
        self.future: Future[list] = Future()


class Scheduler:
    """Bounded admission + one batching thread per scorer; `observe(scorer, answers, seconds)` sees each batch."""

    def __init__(
        self, scorers: dict[str, Scorer], max_queue_items: int = 4096, max_batch_items: int = 256, observe=None
    ):
        self.scorers, self.max_queue_items, self.max_batch_items = scorers, max_queue_items, max_batch_items
        self.observe = observe or (lambda *a: None)
        self.pending, self.rate = 0, 0.0  # items admitted and not yet answered; recent items/s (for Retry-After)
        self._lock = threading.Lock()
        self._queues: dict[str, queue.Queue[Job | None]] = {name: queue.Queue() for name in scorers}
        self._threads = [
            threading.Thread(target=self._run, args=(name,), name=f"rlvr-serve-{name}", daemon=True) for name in scorers
        ]
        for t in self._threads:
            t.start()

    def admit(self, n: int) -> None:
        """Reserve room for n items, or 429 (BadRequest with `retry_after` seconds) when the queue is full."""
        with self._lock:
            if self.pending + n > self.max_queue_items:
                err = BadRequest(
                    429, f"queue full: {self.pending} items waiting (limit {self.max_queue_items}); retry later"
                )
                err.retry_after = self.retry_after()
                raise err
            self.pending += n

    def retry_after(self) -> int:
        """Seconds until the queue has drained at the recent rate, 1 to 60."""
        return int(min(60, max(1, math.ceil(self.pending / self.rate)))) if self.rate > 0 else 1

    def submit(self, scorer: str, completions: list, problems: list) -> Future:
        """Queue admitted items; the future resolves to one answer dict per item, in order."""
        job = Job(completions, problems)
        self._queues[scorer].put(job)
        return job.future

    def release(self, n: int) -> None:
        with self._lock:
            self.pending -= n

    def _run(self, name: str) -> None:
        q, reward = self._queues[name], self.scorers[name].reward
        keep_pools(reward)
        while True:
            job = q.get()
            if job is None:
                close_pools(reward)
                return
            jobs, size = [job], len(job.completions)
            while size < self.max_batch_items:
                try:
                    more = q.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    q.put(None)  # stop after this batch
                    break
                jobs.append(more)
                size += len(more.completions)
            self._score(name, reward, jobs, size)

    def _score(self, name: str, reward: Reward, jobs: list[Job], size: int) -> None:
        start = time.monotonic()
        answers = score_jobs(reward, sum((j.completions for j in jobs), []), sum((j.problems for j in jobs), []))
        seconds = time.monotonic() - start
        with self._lock:
            now = size / max(seconds, 1e-6)
            self.rate = now if self.rate == 0 else 0.7 * self.rate + 0.3 * now
        try:
            self.observe(name, answers, seconds)
        except Exception as e:  # noqa: BLE001 - metrics never cost an answer
            print(f"rlvr serve: metrics failed: {e}", file=sys.stderr)
        at = 0
        for job in jobs:
            n = len(job.completions)
            try:
                job.future.set_result(answers[at : at + n])
            except InvalidStateError:  # the request was cancelled (its client went away): nobody waits
                pass
            self.release(n)
            at += n

    def close(self, timeout_s: float = 60.0) -> None:
        """Finish every queued job, then stop the threads."""
        for q in self._queues.values():
            q.put(None)
        for t in self._threads:
            t.join(timeout=timeout_s)
