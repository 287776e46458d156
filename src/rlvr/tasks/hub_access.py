"""What the hub can give, asked the same way for a model (rlvr.policy.load) and a dataset (the hub task): its cache
first (no request at all when the id is there), then HF_HUB_OFFLINE, then one request. A hub id it cannot give is one
line (a ConfigError: exit 2) naming the id, the cache it looked in, HF_HUB_OFFLINE and what works offline instead,
before anything is written; not the libraries' retries (datasets' are ~25 s) and a traceback."""

from __future__ import annotations

import os
import re
from typing import Any

from rlvr.errors import ConfigError

# "org/name" or a bare canonical name ("gpt2"); anything with more path to it is a folder that does not exist
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?")
# how a local path starts (runs/: where rlvr writes runs); such a name that does not exist is a mistyped path
LOCAL = ("/", "./", "../", "~", "runs/")


class HubUnavailable(ConfigError):
    """A hub id the hub cannot give (unreachable, offline, no such repo) and the cache lacks."""


def looks_local(name: str) -> bool:
    """Whether `name` is written as a local path (the hub would only say it has no such repo)."""
    return name.startswith(LOCAL) or "\\" in name


def hub_cache() -> str:
    """The hub cache folder, as huggingface_hub would use it now ($HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache)."""
    from huggingface_hub import constants

    if os.environ.get("HF_HUB_CACHE"):
        return os.environ["HF_HUB_CACHE"]
    if os.environ.get("HF_HOME"):
        return os.path.join(os.environ["HF_HOME"], "hub")
    return constants.HF_HUB_CACHE


def offline() -> bool:
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE) or os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in (
        "1",
        "true",
        "yes",
        "on",
    )


def cached(repo_id: str, repo_type: str = "model") -> str | None:
    """The cached snapshot folder of `repo_id` (its main revision), or None; no request."""
    from huggingface_hub import snapshot_download

    try:
        return snapshot_download(repo_id, repo_type=repo_type, cache_dir=hub_cache(), local_files_only=True)
    except Exception:  # not cached (or a partial entry)
        return None


def ask_hub(repo_id: str, repo_type: str = "model") -> tuple[Any, str | None]:
    """(the hub's info on the repo, None) when the hub has it; (None, why not) after one request."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, RepositoryNotFoundError

    info = HfApi().dataset_info if repo_type == "dataset" else HfApi().model_info
    try:
        return info(repo_id, timeout=15), None
    except GatedRepoError:
        return None, "the hub says it is gated (accept its terms and log in: hf auth login)"
    except RepositoryNotFoundError:
        return None, f"the hub has no such {repo_type} (or it is private)"
    except HfHubHTTPError as e:
        return None, f"the hub answered {str(e).splitlines()[0][:120]}"
    except Exception as e:  # connection refused, no DNS, a proxy, a timeout: the hub cannot be reached
        return None, f"the hub cannot be reached ({type(e).__name__}: {str(e).splitlines()[0][:100] if str(e) else ''})"


def from_hub(
    repo_id: str, repo_type: str, instead: str, error: type[ConfigError] = HubUnavailable
) -> tuple[str | None, Any]:
    """(its cached snapshot, None) when the cache has `repo_id`; (None, the hub's info) when one request finds it
    there; else `error`, one line ending in `instead` (what works offline)."""
    snapshot = cached(repo_id, repo_type)
    if snapshot:
        return snapshot, None
    cache = hub_cache()
    if offline():
        raise error(
            f"{repo_type} {repo_id!r} is not in the hub cache {cache} and HF_HUB_OFFLINE is set; "
            f"download it where the hub can be reached, or use {instead}"
        )
    info, why = ask_hub(repo_id, repo_type)
    if why:
        raise error(
            f"{repo_type} {repo_id!r}: {why}, and it is not in the hub cache {cache} either "
            f"(HF_HUB_CACHE moves the cache, HF_HUB_OFFLINE=1 skips the hub); {instead}"
        )
    return None, info


__all__ = ["HUB_ID", "LOCAL", "HubUnavailable", "looks_local", "hub_cache", "offline", "cached", "ask_hub", "from_hub"]
