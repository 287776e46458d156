"""The distillation teacher a config names (the `distill` section, docs/distillation.md): which model it is, refused
before anything is written when it cannot teach this policy, built beside the policy, and each step's per-token
advantages from its scores (rlvr.algorithms.distill).

What `distill.teacher` may name, and the form it takes:
- a run directory trained with LoRA on the policy's own base model: its final/adapter, switched to on the policy's base
  weights (rlvr.policy.teacher.AdapterTeacher: no second model in memory); a PEFT adapter folder on that base likewise;
- a run trained otherwise, an adapter on another base, a model folder, the embedded name or a hub id: the whole model,
  loaded frozen on the policy's device (ModelTeacher);
- with `distill.urls`: the model `vllm serve` serves at those addresses, asked for the prompt log-probs of the
  student's token ids (rlvr.sampling.remote_teacher.RemoteTeacher); each server is checked here, before anything is
  written.
Every form must share the policy's tokenizer (the same vocabulary, token for token): the per-token log ratio compares
two distributions over the same ids. Cross-tokenizer distillation is out of scope.

A teacher handed over half-made is refused in one line naming what it lacks, before any model loads: a model folder
without its tokenizer (`model.save_pretrained(DIR)` alone), without weights or a shard of them, weights without
config.json, an adapter folder without its weights; a file that is not GGUF, or a GGUF whose tokenizer (read from its
metadata) is not the policy's, before the file is converted.
"""

from __future__ import annotations

import json
import time
import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

import torch

from rlvr.algorithms.advantages import nonzero_variance_groups
from rlvr.algorithms.distill import SUM_KEYS, distill_advantages, distill_figures, distill_sums
from rlvr.algorithms.step_batch import StepBatch
from rlvr.config import Config, ConfigError, DistillConfig
from rlvr.evaluation.models import is_adapter_dir, is_run_dir
from rlvr.policy.gguf import GGUFRefused, check_gguf, is_gguf_name
from rlvr.policy.update import UpdateSettings

TIMEOUT_S = 60.0  # a served teacher's request: one prefill of a row
STAT = "distill_sum/"  # the prefix of the figures' sums in a batch's stats (summed over ranks as every count is)
# what from_pretrained reads a model folder's weights from (one file, or an index naming its shards)
WEIGHTS = ("model.safetensors", "pytorch_model.bin", "model.safetensors.index.json", "pytorch_model.bin.index.json")
ADAPTER_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")
VOCABULARY = ("tokenizer.json", "tokenizer.model", "vocab.json", "vocab.txt")  # a tokenizer's own files, any of them


class Teacher(Protocol):
    label: str

    def logprobs(self, batch: StepBatch, s: UpdateSettings) -> torch.Tensor: ...


@dataclass(frozen=True)
class TeacherSpec:
    """What `distill.teacher` resolved to. form: "adapter" (on the policy's own base), "model" (a whole model),
    "server" (vllm serve); where: the adapter folder, the model's folder or name, or the served model's name."""

    form: str
    where: str
    label: str


def resolve_teacher(cfg: Config) -> TeacherSpec | None:
    """The teacher of `cfg` (None with distill.coef 0: the run is exactly one without a teacher), or a ConfigError of
    one line: no teacher named, a path that is none of the things a teacher can be, a folder or file half-made, a hub
    id that cannot be had, a tokenizer other than the policy's. Reads tokenizers and configs, loads no weights (a
    GGUF file is converted, once, after its tokenizer is found to be the policy's)."""
    d = cfg.distill
    if d.coef == 0:
        return None
    if d.rows == "no_signal" and not d.verifier:
        raise ConfigError(
            "distill.rows = no_signal with distill.verifier = false: the groups the teacher does not score would train "
            "on nothing; keep the verifier (distill.verifier: true) or let the teacher score every row (rows: all)"
        )
    if not d.teacher:
        raise ConfigError(
            f"distill.coef = {d.coef:g} needs distill.teacher: a run directory, a PEFT adapter folder, a model folder "
            "or hub id with the policy's tokenizer (docs/distillation.md)"
        )
    if d.urls:
        if cfg.rollout.temperature != 1.0:
            raise ConfigError(
                f"distill.urls with rollout.temperature = {cfg.rollout.temperature:g}: vLLM gives prompt log-probs of "
                "the untempered logits, so a served teacher scores at temperature 1 only; sample at 1 or load the "
                "teacher in process (distill.urls: [])"
            )
        _check_servers(cfg)
        return TeacherSpec("server", d.teacher, d.teacher)
    spec = _local_spec(cfg, d)
    if spec.form == "adapter" and cfg.train.fsdp:
        raise ConfigError(
            f"distill.teacher = {d.teacher}: an adapter teacher switches adapters on the policy's own "
            "weights, which train.fsdp shards; give its run's final/merged model instead"
        )
    _check_tokenizer(cfg, spec)
    if is_gguf_name(spec.where):
        from rlvr.policy.load import resolve_model_path

        spec = replace(spec, where=resolve_model_path(spec.where))
    return spec


def _check_servers(cfg: Config) -> None:
    """Each teacher server serves distill.teacher and tokenizes as the policy does (rlvr.sampling.remote_teacher's
    check, a ServerMismatch otherwise), asked here so that a refusal comes before the run directory is written; no
    server answering is a config mistake too (distill.urls)."""
    from transformers import AutoTokenizer

    from rlvr.policy.load import resolve_model_path
    from rlvr.sampling.remote import RemoteError, ServerMismatch
    from rlvr.sampling.remote_teacher import RemoteTeacher

    tokenizer = AutoTokenizer.from_pretrained(resolve_model_path(cfg.model.name))
    try:
        with warnings.catch_warnings():  # a server lost here is said when the run builds its teacher
            warnings.simplefilter("ignore", RuntimeWarning)
            RemoteTeacher(cfg.distill.urls, cfg.distill.teacher, tokenizer, timeout_s=TIMEOUT_S)
    except ServerMismatch:
        raise
    except ValueError as e:  # not an address
        raise ConfigError(str(e)) from None
    except RemoteError as e:
        raise ConfigError(f"distill.urls = {cfg.distill.urls}: no teacher server answered ({e})") from None


def _local_spec(cfg: Config, d: DistillConfig) -> TeacherSpec:
    """The form and place of a teacher that is no server, each half-made folder or file refused in one line. A GGUF
    file's spec names the file itself: resolve_teacher converts it once its tokenizer has been checked."""
    from rlvr.policy.load import resolve_model_path

    path = Path(d.teacher).expanduser()
    if is_run_dir(path):
        adapter, merged = path / "final" / "adapter", path / "final" / "merged"
        if (adapter / "adapter_config.json").exists() and _on_policy_base(cfg, adapter):
            _check_adapter_folder(d.teacher, adapter)
            return TeacherSpec("adapter", str(adapter), d.teacher)
        if (merged / "config.json").exists():
            _check_model_folder(d.teacher, merged)
            return TeacherSpec("model", str(merged), d.teacher)
        raise ConfigError(f"distill.teacher = {d.teacher}: the run has no final model yet (is it still training?)")
    if is_adapter_dir(path):
        _check_adapter_folder(d.teacher, path)
        return TeacherSpec("adapter" if _on_policy_base(cfg, path) else "model", str(path), d.teacher)
    if path.is_dir() and not (path / "config.json").exists():
        raise ConfigError(_not_a_model(d.teacher, path))
    if path.is_dir():
        _check_model_folder(d.teacher, path)
        return TeacherSpec("model", str(path), d.teacher)
    if path.is_file():  # a GGUF file, as rlvr.policy.gguf.is_gguf_name takes any file to be
        try:
            check_gguf(path, d.teacher)
        except GGUFRefused as e:  # its line, naming the setting rather than a model
            raise ConfigError(
                f"distill.teacher = {d.teacher}: {str(e).removeprefix(f'model {d.teacher!r}: ')}"
            ) from None
        return TeacherSpec("model", str(path), d.teacher)
    return TeacherSpec("model", resolve_model_path(d.teacher), d.teacher)


def _not_a_model(label: str, folder: Path) -> str:
    """Why a folder without config.json is no teacher: the weights it holds without their config, else what it is."""
    held = sorted(p.name + "/" * p.is_dir() for p in folder.iterdir() if not p.name.startswith("."))
    weights = [n for n in held if n.endswith((".safetensors", ".bin"))]
    if weights and all(n.startswith("adapter_model") for n in weights):
        return (
            f"distill.teacher = {label}: the folder holds an adapter's weights ({', '.join(weights)}) but no "
            "adapter_config.json; save the adapter whole: model.save_pretrained(DIR) writes both"
        )
    if weights:
        return (
            f"distill.teacher = {label}: the folder holds weights ({', '.join(weights[:3])}{', ...' * (len(weights) > 3)}) "
            "but no config.json; save the model whole: model.save_pretrained(DIR) writes both"
        )
    holds = f"it holds {', '.join(held[:8])}{', ...' * (len(held) > 8)}" if held else "it is empty"
    return (
        f"distill.teacher = {label}: not a run directory, a PEFT adapter folder (adapter_config.json) or a model "
        f"folder (config.json); {holds}"
    )


def _check_model_folder(label: str, folder: Path) -> None:
    """A model folder (config.json) must hold its weights, each shard its index names, and its tokenizer: else one
    line naming what is missing (transformers would end in a traceback, the tokenizer's after the weights loaded)."""
    lacks, fixes = [], []
    if not any((folder / name).exists() for name in WEIGHTS):
        lacks.append(f"no weights ({', '.join(WEIGHTS[:2])} or a shard index such as {WEIGHTS[2]})")
        fixes.append("the model with model.save_pretrained(DIR)")
    if not any((folder / name).exists() for name in VOCABULARY) and not any(folder.glob("*.tiktoken")):
        lacks.append(f"no tokenizer files ({', '.join(VOCABULARY[:2])} or {VOCABULARY[2]})")
        fixes.append("the tokenizer beside the weights with tokenizer.save_pretrained(DIR)")
    if lacks:
        raise ConfigError(
            f"distill.teacher = {label}: the model folder has config.json but {' and '.join(lacks)}; save "
            + " and ".join(fixes)
        )
    for index in (folder / WEIGHTS[2], folder / WEIGHTS[3]):
        if not index.exists():
            continue
        try:
            shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        except (OSError, ValueError, KeyError, AttributeError):
            raise ConfigError(f"distill.teacher = {label}: {index.name} is no shard index (no weight_map)") from None
        missing = [s for s in shards if not (folder / s).exists()]
        if missing:
            raise ConfigError(
                f"distill.teacher = {label}: {index.name} names {len(shards)} weight files and {len(missing)} are "
                f"missing: {', '.join(missing[:3])}{', ...' * (len(missing) > 3)}"
            )


def _check_adapter_folder(label: str, folder: Path) -> None:
    """A PEFT adapter folder must hold its weights and name its base model (whose weights, and tokenizer where the
    folder has none, it runs with)."""
    if not any((folder / name).exists() for name in ADAPTER_WEIGHTS):
        raise ConfigError(
            f"distill.teacher = {label}: the adapter folder has adapter_config.json but no weights "
            f"({' or '.join(ADAPTER_WEIGHTS)})"
        )
    try:
        base = json.loads((folder / "adapter_config.json").read_text()).get("base_model_name_or_path")
    except (OSError, ValueError, AttributeError):
        raise ConfigError(f"distill.teacher = {label}: its adapter_config.json is not a JSON object") from None
    if not base:
        raise ConfigError(
            f"distill.teacher = {label}: its adapter_config.json names no base model (base_model_name_or_path)"
        )


def _on_policy_base(cfg: Config, adapter: Path) -> bool:
    """Whether the adapter was trained on the policy's own base model, so that it can run on the policy's weights:
    its adapter_config names the same base (by hub id, as rlvr names it) and the policy has LoRA to switch."""
    from rlvr.policy.load import base_model_id

    base = json.loads((adapter / "adapter_config.json").read_text()).get("base_model_name_or_path") or ""
    return cfg.model.lora.enabled and bool(base) and base_model_id(base) == base_model_id(cfg.model.name)


def _check_tokenizer(cfg: Config, spec: TeacherSpec) -> None:
    """The teacher's tokenizer must be the policy's, id for id: else one line naming both. A GGUF file's is read from
    its metadata (no weights); one that cannot be read at all is said in one line too."""
    from transformers import AutoTokenizer

    from rlvr.policy.load import resolve_model_path

    student = AutoTokenizer.from_pretrained(resolve_model_path(cfg.model.name))
    where = Path(spec.where)
    if is_gguf_name(spec.where):
        folder, kw = str(where.parent), {"gguf_file": where.name}
    else:
        folder, kw = _tokenizer_folder(spec), {}
    try:
        teacher = AutoTokenizer.from_pretrained(folder, **kw)
    except Exception as e:  # transformers and tokenizers raise many kinds at a garbled tokenizer file
        why = " ".join(str(e).split()) or type(e).__name__
        raise ConfigError(f"distill.teacher = {spec.label}: its tokenizer cannot be read ({why})") from None
    if teacher.get_vocab() != student.get_vocab():
        raise ConfigError(
            f"distill.teacher = {spec.label}: its tokenizer ({len(teacher)} tokens) is not the policy's "
            f"({cfg.model.name}: {len(student)} tokens); the per-token term compares the two models on the same ids, "
            "so the teacher must share the student's tokenizer (cross-tokenizer distillation is not supported)"
        )


def _tokenizer_folder(spec: TeacherSpec) -> str:
    """Where the teacher's tokenizer is: its folder (a model folder has one, checked; rlvr saves the tokenizer beside
    an adapter), else its adapter's base's."""
    folder = Path(spec.where)
    if not is_adapter_dir(folder) or any((folder / n).exists() for n in ("tokenizer_config.json", *VOCABULARY)):
        return str(folder)
    from rlvr.policy.load import resolve_model_path

    return resolve_model_path(json.loads((folder / "adapter_config.json").read_text())["base_model_name_or_path"])


def build_teacher(spec: TeacherSpec, cfg: Config, model, tokenizer) -> Teacher:
    """The teacher itself, beside `model` (the policy, built: with its adapter and fast path)."""
    from rlvr.policy.load import load_policy, model_device
    from rlvr.policy.teacher import AdapterTeacher, ModelTeacher

    if spec.form == "adapter":
        return AdapterTeacher(model, spec.where, spec.label)
    if spec.form == "server":
        from rlvr.sampling.remote_teacher import RemoteTeacher

        return RemoteTeacher(cfg.distill.urls, spec.where, tokenizer, timeout_s=TIMEOUT_S)
    if is_adapter_dir(spec.where):  # an adapter on another base: its base with it merged
        from rlvr.evaluation.models import adapter_policy

        whole, _ = adapter_policy(spec.where)
    else:
        whole, _ = load_policy(spec.where, cfg.model.dtype)
    return ModelTeacher(whole, model_device(model), spec.label)


def scored_rows(batch: StepBatch, rows: str) -> torch.Tensor:
    """(B,) bool: the rows the teacher scores (distill.rows). "all"; "no_signal": the rows of the groups whose
    correctness term (the reward's first term; the reward itself where it has no terms) is the same on every sample."""
    if rows == "all":
        return torch.ones(len(batch), dtype=torch.bool)
    graded = batch.graded()
    return ~nonzero_variance_groups(batch.rewards.cpu() if graded is None else graded, batch.group_ids.cpu())


def distill_batch(teacher: Teacher, batch: StepBatch, d: DistillConfig, s: UpdateSettings) -> None:
    """The teacher scores the batch's kept rows (those of distill.rows); their advantages become per token
    (rlvr.algorithms.distill), the other rows' stay the verifier's group advantage on every trained token; the sums of
    the step's distill/* figures and the teacher's time go into batch.stats."""
    if not len(batch) or batch.advantages is None:
        return
    t0 = time.perf_counter()
    scored = scored_rows(batch, d.rows).to(batch.mask.device)
    mask = batch.mask * scored[:, None]  # every teacher form skips a row with no token on the mask
    # a row the teacher did not score has d_it = 0: its advantage is the verifier's alone
    teacher_logp = torch.where(mask > 0, teacher.logprobs(replace(batch, mask=mask), s), batch.sampler_logp)
    group = batch.advantages
    token_adv = distill_advantages(
        group, batch.sampler_logp, teacher_logp, mask, coef=d.coef, clip=d.clip, verifier=d.verifier, control=d.control
    )
    base = group if d.verifier else torch.zeros_like(group)
    sums = distill_sums(base, token_adv, batch.sampler_logp, teacher_logp, mask, d.clip)
    if not bool(scored.all()):  # rows: no_signal (verifier on): the others train on the group advantage alone
        plain = base.float()[:, None] * batch.mask
        token_adv = torch.where(scored[:, None], token_adv, plain)
        sums["verifier"] += float(plain[~scored].abs().sum())
    batch.advantages = token_adv
    batch.stats.update({STAT + k: v for k, v in sums.items()})
    batch.stats["time/teacher"] = time.perf_counter() - t0


def distill_metrics(stats: dict) -> dict[str, float]:
    """The metrics line's distill/* figures and time/teacher from a (global) batch's stats; {} without a teacher."""
    if STAT + "tokens" not in stats:
        return {}
    return {**distill_figures({k: stats[STAT + k] for k in SUM_KEYS}), "time/teacher": stats["time/teacher"]}


__all__ = [
    "Teacher",
    "TeacherSpec",
    "resolve_teacher",
    "build_teacher",
    "scored_rows",
    "distill_batch",
    "distill_metrics",
]
