"""Config validation: every mistake is one line naming the key, the value and the choices."""

import pytest

from rlvr.cli import main
from rlvr.config import DEFAULTS, REGISTERED, REGISTERED_WHERE, ConfigError, as_config, dump, parse_set, resolve
from rlvr.training.lifecycle import KEYED_REGISTRIES, check_registered


def read(sets, source=None):
    """A config as every entry point reads it: resolve (keys, types, ranges, choices), then the names of registry
    entries against their registries (check_registered)."""
    return check_registered(as_config(resolve(source, sets))).to_dict()


@pytest.mark.parametrize(
    "sets, message",
    [
        (
            ["train.lrr=1"],
            "unknown config key 'train.lrr'; allowed keys in 'train': attention, autocast, fsdp, gradient_checkpointing, init_from_sft, lr, lr_schedule",
        ),
        (
            ["bogus=1"],
            "unknown config key 'bogus'; allowed keys at the top level: algorithm, curriculum, distill, episode, eval, log, model, output_dir, reward, rollout, seed, sft",
        ),
        (["train.lr=fast"], "config key 'train.lr' must be float or auto, got 'fast'"),
        (["train.steps=1.5"], "config key 'train.steps' must be int, got 1.5"),
        (["model.lora.enabled=3"], "config key 'model.lora.enabled' must be bool, got 3"),
        (["rollout.backend=tpu"], "config key 'rollout.backend' = 'tpu'; choose from hf, fast, remote, vllm"),
        (["reward.control=coin"], "config key 'reward.control' = 'coin'; choose from none, random_rate, format_only"),
        (
            ["reward.control=no_tools"],
            "config key 'reward.control' = 'no_tools'; choose from none, random_rate, format_only",
        ),
        (
            ["eval.controls=[none]"],
            "config key 'eval.controls' lists 'none'; choose from random_rate, format_only, no_tools",
        ),
        (
            ["eval.controls=[coin]"],
            "config key 'eval.controls' lists 'coin'; choose from random_rate, format_only, no_tools",
        ),
        (["episode.call_format=xml"], "config key 'episode.call_format' = 'xml'; choose from hermes"),
        (
            ["episode.environment=gym"],
            "config key 'episode.environment' = 'gym'; choose from none, tool, retry, trl, verifiers, openenv",
        ),
        (["episode.tools=[abacus]"], "config key 'episode.tools' lists 'abacus'; choose from calculator, python"),
        (["log.report_to=[1]"], "config key 'log.report_to' lists 1; each item must be str"),
        (["model=3"], "config key 'model' must be a mapping, got 3"),
        (
            ["log.checkpoint_minute=5"],
            "unknown config key 'log.checkpoint_minute'; allowed keys in 'log': checkpoint_every, checkpoint_minutes, "
            "eval_every,",
        ),
        (["log.checkpoint_minutes=-1"], "config key 'log.checkpoint_minutes' = -1; must be >= 0"),
        (
            ["episode.tools=[calculator]"],
            "episode.tools = ['calculator'] but episode.environment is 'none', which offers no tools; set "
            "episode.environment: tool to train with them, or episode.tools: [] to train without",
        ),
        (
            ["episode.environment=retry", "episode.tools=calculator,python"],
            "episode.tools = ['calculator', 'python'] but episode.environment is 'retry', which offers no tools;",
        ),
    ],
)
def test_bad_values_name_key_and_choices(sets, message):
    with pytest.raises(ConfigError) as e:
        read(sets)
    assert message in str(e.value)
    assert "\n" not in str(e.value)


def test_tools_need_the_tool_environment_and_a_plugin_environment_may_take_them():
    assert read(["episode.environment=tool", "episode.tools=[calculator]"])["episode"]["tools"] == ["calculator"]
    plugin = read(["episode.environment=test_config:plugin_environment", "episode.tools=[calculator]"])["episode"]
    assert plugin["tools"] == ["calculator"]  # its own code decides what episode.tools means to it
    assert read(["episode.tools=[]"])["episode"]["tools"] == []
    assert DEFAULTS["log"]["checkpoint_minutes"] == 10.0


def plugin_environment(task, reward, episode):
    """A plug-in environment's factory (package.module:attr): imported by the check to ask whether it takes tools."""
    raise AssertionError("the config check asks the entry, it never builds an environment")


def test_each_environment_entry_says_whether_it_takes_tools():
    """episode.tools are offered by an environment whose entry says takes_tools: the check above and a resume's rule
    (rlvr.training.lifecycle.changed_settings) ask the entry, not the name."""
    from rlvr.environments.build import ENVIRONMENTS, takes_tools

    assert {name: takes_tools(name) for name in ENVIRONMENTS} == {
        "none": False,
        "tool": True,
        "retry": False,
        "trl": False,
        "verifiers": False,
        "openenv": False,
    }
    assert takes_tools("test_config:plugin_environment")  # given the episode section, it may read them


def test_set_parses_yaml_values_and_nests():
    assert parse_set("train.lr=1e-5") == {"train": {"lr": 1e-5}}
    assert parse_set("model.lora.enabled=false") == {"model": {"lora": {"enabled": False}}}
    cfg = resolve(None, ["train.lr=3e-4", "train.steps=7", "rollout.group_size=4"])
    assert cfg["train"]["lr"] == 3e-4 and cfg["train"]["steps"] == 7 and cfg["rollout"]["group_size"] == 4
    assert cfg["train"]["micro_batch_size"] == DEFAULTS["train"]["micro_batch_size"]  # untouched keys keep defaults


def test_a_config_from_scratch_trains_like_the_default_preset():
    """The bare defaults (issue 64): a LoRA learning rate with LoRA on, the fast sampler, `auto` dtypes, as the default
    preset has them (it used to be lr 1e-5, a full fine-tuning rate, and the hf sampler); `train.lr: auto` is a full
    fine-tuning rate without LoRA, and config.yaml records the number either way."""

    def values(cfg):  # model.lora.enabled, train.lr, rollout.backend, rollout.dtype, train.autocast
        r, t = cfg["rollout"], cfg["train"]
        return [cfg["model"]["lora"]["enabled"], t["lr"], r["backend"], r["dtype"], t["autocast"]]

    assert values(resolve(None)) == values(resolve("default"))
    assert resolve(None)["train"]["lr"] == 2e-4 and resolve(None)["rollout"]["backend"] == "fast"
    assert DEFAULTS["train"]["lr"] == "auto"  # made concrete when the config resolves
    assert resolve(None, ["model.lora.enabled=false"])["train"]["lr"] == 1e-5
    assert resolve("default", ["model.lora.enabled=false", "train.lr=auto"])["train"]["lr"] == 1e-5
    assert resolve(None, ["model.lora.enabled=false", "train.lr=3e-6"])["train"]["lr"] == 3e-6  # a number is kept
    assert as_config({"model": {"lora": {"enabled": False}}}).train.lr == 1e-5  # the Python API's dicts too
    assert "lr: 0.0002" in dump(resolve(None)) and "lr: auto" not in dump(resolve(None))  # what config.yaml records


def test_int_is_accepted_where_float_is_expected():
    assert resolve(None, ["train.lr=1"])["train"]["lr"] == 1.0
    assert isinstance(resolve(None, ["train.lr=1"])["train"]["lr"], float)


def test_yaml_file_is_validated(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("train:\n  lr: 2.0e-5\n  stepz: 3\n")
    with pytest.raises(ConfigError, match="unknown config key 'train.stepz'"):
        resolve(str(path))


def test_cli_bad_key_exits_2_with_one_line_and_no_run_dir(tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["train", "--set", "train.lrr=1", "--output-dir", str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err.count("\n") == 0 and "train.lrr" in err and "allowed keys" in err
    assert not out.exists()


def test_cli_bad_algorithm_field_exits_2_before_run_dir(tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["train", "--set", "algorithm.clip_hi=0.3", "--output-dir", str(out)])
    assert code == 2 and "clip_hi" in capsys.readouterr().err
    assert not out.exists()


def test_dotted_sets_into_an_open_section_add_up_and_a_whole_mapping_replaces_it():
    """`--set algorithm.preset=dapo --set algorithm.clip_high=0.3` keeps both (the second used to drop the first);
    `--set 'algorithm={preset: gspo}'` replaces the section; the same for task settings, nested keys included."""
    from rlvr.config import resolve

    cfg = resolve(None, ["algorithm.preset=dapo", "algorithm.clip_high=0.3"])
    assert cfg["algorithm"] == {"preset": "dapo", "clip_high": 0.3}
    assert resolve(None, ["algorithm.clip_high=0.3", "algorithm={preset: gspo}"])["algorithm"] == {"preset": "gspo"}
    cfg = resolve("default", ["task.settings.per_band=50", "task.settings.extra.a=1", "task.settings.extra.b=2"])
    assert cfg["task"]["settings"] == {
        "seed": 0,
        "per_band": 50,
        "bands": ["1-digit", "2-digit", "3-digit"],
        "one_shot": True,
        "extra": {"a": 1, "b": 2},
    }
    assert type(cfg["task"]["settings"]) is dict and type(cfg["task"]["settings"]["extra"]) is dict


def test_a_registry_is_the_one_list_of_the_names_its_config_key_takes():
    """Each registry-backed key names its registry (rlvr.config.REGISTERED), whose own key is that config key: a new
    built-in entry is accepted by the config without a second list to edit, and a plug-in reference passes too."""
    assert REGISTERED == {
        "reward.control": "reward control",
        "rollout.backend": "sampler backend",
        "episode.environment": "environment",
        "episode.tools": "tool",
        "episode.call_format": "tool call format",
        "log.report_to": "tracker",
        "eval.controls": "reward control",
    }
    assert REGISTERED_WHERE == {"reward.control": "on_reward", "eval.controls": "is_control_run"}
    # each registry's own key is the config key that names its entries; eval.controls names CONTROLS' control runs
    assert {key: KEYED_REGISTRIES[what].key for key, what in REGISTERED.items()} == {k: k for k in REGISTERED} | {
        "eval.controls": "reward.control"
    }
    backends = KEYED_REGISTRIES["sampler backend"]
    with pytest.raises(ConfigError, match=r"^config key 'rollout.backend' = 'abacus'; choose from hf, fast, remote"):
        read(["rollout.backend=abacus"])
    backends.add("abacus", backends.get("hf"), "a test's backend")
    try:
        assert read(["rollout.backend=abacus"])["rollout"]["backend"] == "abacus"
    finally:
        backends.remove("abacus")
    assert read(["rollout.backend=my_pkg.samplers:make", "log.report_to=[my_pkg.trackers:T, mlflow]"])["log"][
        "report_to"
    ] == ["my_pkg.trackers:T", "mlflow"]


def test_resolve_reads_a_registry_name_and_the_entry_points_refuse_it_before_the_run_directory(tmp_path, capsys):
    """rlvr.config sees no registry (they live in later packages): resolve takes any str for a registry-backed key,
    and check_registered, which every entry point calls first, refuses an unknown one with the config's wording."""
    assert resolve(None, ["rollout.backend=tpu"])["rollout"]["backend"] == "tpu"
    out = tmp_path / "run"
    assert main(["train", "--set", "rollout.backend=tpu", "--output-dir", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "rlvr train: config key 'rollout.backend' = 'tpu'; choose from hf, fast, remote, vllm"
    assert not out.exists()
    assert main(["run", "--set", "log.report_to=[tensorbord]", "--output-dir", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        err
        == "rlvr run: config key 'log.report_to' lists 'tensorbord'; choose from tensorboard, mlflow, trackio, wandb"
    )
    assert not out.exists()
    assert main(["eval", "--model", "x", "--task", "arithmetic", "--set", "episode.environment=gym"]) == 2
    assert capsys.readouterr().err.startswith("rlvr eval: config key 'episode.environment' = 'gym'; choose from none,")
