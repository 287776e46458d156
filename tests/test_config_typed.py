"""One validated, typed Config from the command line inward (issue 48): past the entry points (cli/, and the YAML
boundary in config/ and yaml_io.py) functions read `cfg.train.lr`, never `cfg["train"]["lr"]`."""

import re
from pathlib import Path

import pytest

from rlvr.config import DEFAULTS, Config, ConfigError, RewardConfig, as_config, resolve, reward_config

SRC = Path(__file__).resolve().parent.parent / "src" / "rlvr"

# A dict read of a config: cfg["train"], rl_cfg['log'], cfg.get("reward", ...).
DICT_READ = re.compile(r"cfg\[['\"]|cfg\.get\(")

# Where a dict named like a config is read, and why that is not the config's own keys.
EXEMPT = {
    "cli": "the command line: argument parsing turns YAML and --set into the Config",
    "config": "the YAML boundary: merges and checks the dicts it types",
    "yaml_io.py": "the YAML boundary: reads the text",
    "machine.py": "auto_dtypes, called by config.resolve on the dict it is checking (a leaf before config)",
    "verifiers/_sandbox_launcher.py": "its cfg is the sandbox launch spec (JSON on stdin), not rlvr's config",
    "policy/load.py": "its cfg is a PEFT adapter_config.json",
    "prompts/curriculum.py": "the curriculum section is open (a dict by nature, checked by build_curriculum)",
    "algorithms/presets.py": "the algorithm section is open (a preset and overrides, checked by algorithm_from_config)",
}


def dict_reads(root: Path = SRC) -> list[str]:
    """'path:line: text' of every dict read of a config outside EXEMPT."""
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if any(rel == key or rel.startswith(f"{key}/") for key in EXEMPT):
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if DICT_READ.search(line.split("#", 1)[0]):
                found.append(f"{rel}:{n}: {line.strip()}")
    return found


def test_no_dict_read_of_the_config_past_the_entry_points():
    assert dict_reads() == []


def test_the_check_sees_a_dict_read(tmp_path):
    (tmp_path / "training").mkdir()
    (tmp_path / "training" / "x.py").write_text('lr = cfg["train"]["lr"]\nn = rl_cfg.get("seed")\nok = cfg.train.lr\n')
    (tmp_path / "cli").mkdir()
    (tmp_path / "cli" / "y.py").write_text('lr = cfg["train"]["lr"]\n')
    assert dict_reads(tmp_path) == [
        'training/x.py:1: lr = cfg["train"]["lr"]',
        'training/x.py:2: n = rl_cfg.get("seed")',
    ]


def test_as_config_types_a_resolved_dict_unchanged_and_checks_a_partial_one():
    cfg = resolve("default", ["train.steps=3"])
    typed = as_config(cfg)
    assert isinstance(typed, Config) and typed.train.steps == 3
    assert typed.to_dict() == cfg  # what config.yaml records: the same keys, order and values
    assert list(typed.to_dict()) == list(DEFAULTS)
    assert as_config(typed) is typed
    partial = as_config({"train": {"lr": 1}})
    assert partial.train.lr == 1.0 and isinstance(partial.train.lr, float) and partial.seed == DEFAULTS["seed"]
    with pytest.raises(ConfigError, match=r"^unknown config key 'train.lrr'; allowed keys in 'train': "):
        as_config({"train": {"lrr": 1}})


def test_mismatch_cap_is_checked_with_the_config():
    with pytest.raises(ConfigError, match=r"^config key 'log.mismatch_cap' = 1.0; must be > 1$"):
        resolve(None, ["log.mismatch_cap=1.0"])
    with pytest.raises(ConfigError, match=r"^config key 'log.mismatch_cap' = 0.5; must be > 1$"):
        as_config({"log": {"mismatch_cap": 0.5}})


def test_a_reward_section_given_as_a_dict_is_typed_by_one_function():
    """rlvr verify's and rlvr serve's pools, TRL's reward adapters and the TRL bench worker type a dict reward section
    with rlvr.config.reward_config, over the defaults and checked as a file's; none writes the conversion itself."""
    section = reward_config({"workers": 0, "timeout_s": 3})
    assert section == RewardConfig(workers=0, timeout_s=3.0) and isinstance(section.timeout_s, float)
    with pytest.raises(ConfigError, match=r"^config key 'reward.workers' = -1; must be >= 0$"):
        reward_config({"workers": -1})
    by_hand = re.compile(r"as_config\(\{\s*['\"]reward['\"]|RewardConfig\(\*\*")
    files = [p for r in (SRC, SRC.parent.parent / "benchmarks") for p in sorted(r.rglob("*.py"))]
    found = [
        f"{p.name}:{n}"
        for p in files
        if p.parent != SRC / "config"  # reward_config itself
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if by_hand.search(line)
    ]
    assert found == []
