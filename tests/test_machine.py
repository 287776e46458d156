"""`auto` dtypes pick bf16 only where the CPU computes it in hardware (rlvr.machine), and a run records what it picked."""

import warnings

import pytest
import torch

from conftest import make_tiny_llama
from rlvr import machine
from rlvr.config import Config, resolve

# the first lines of /proc/cpuinfo on three kinds of machine (flags trimmed)
AVX2_ONLY = "processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu sse2 avx avx2 fma\n"
AVX512_BF16 = "processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_bf16 avx512_vnni\n"
ARM_BF16 = "processor\t: 0\nFeatures\t: fp asimd sve bf16 i8mm\n"


@pytest.fixture
def native(monkeypatch):
    """Set what native_bf16 answers for one test (the cache cleared before and after)."""

    def setter(value: bool):
        monkeypatch.setenv("RLVR_NATIVE_BF16", "1" if value else "0")
        machine.native_bf16.cache_clear()

    yield setter
    machine.native_bf16.cache_clear()


def test_the_flags_say_which_cpus_have_bf16_in_hardware():
    assert machine.cpu_flags(AVX2_ONLY) == {"fpu", "sse2", "avx", "avx2", "fma"}
    assert not machine.cpu_flags(AVX2_ONLY) & machine.BF16_FLAGS
    assert machine.cpu_flags(AVX512_BF16) & machine.BF16_FLAGS == {"avx512_bf16"}
    assert machine.cpu_flags(ARM_BF16) & machine.BF16_FLAGS == {"bf16"}
    assert machine.cpu_flags("processor\t: 0\n") == frozenset()


@pytest.mark.parametrize("has_bf16, dtype, autocast", [(True, "bfloat16", "bfloat16"), (False, "float32", "none")])
def test_the_presets_auto_dtypes_resolve_for_this_machine(native, has_bf16, dtype, autocast):
    native(has_bf16)
    for preset in ("default", "reasoning-gym", "tool-use", None):  # None: the bare defaults, `auto` as the presets
        cfg = resolve(preset)
        assert (cfg["rollout"]["dtype"], cfg["train"]["autocast"]) == (dtype, autocast), preset
    # a value given is kept, whatever the machine; auto given on the command line resolves too
    assert resolve("default", ["rollout.dtype=bfloat16"])["rollout"]["dtype"] == "bfloat16"
    assert resolve(None, ["train.autocast=none"])["train"]["autocast"] == "none"
    assert resolve("default", ["train.autocast=auto"])["train"]["autocast"] == autocast


def test_a_bf16_sampler_on_a_cpu_without_it_says_so(native, tokenizer):
    from rlvr.sampling import build_sampler

    model = make_tiny_llama(len(tokenizer))
    native(False)
    with pytest.warns(UserWarning, match=r"rollout.dtype=bfloat16 on a CPU without bf16 in hardware"):
        build_sampler(Config().rollout.__class__(backend="hf", dtype="bfloat16"), model, tokenizer)
    auto = build_sampler(Config().rollout.__class__(backend="hf", dtype="auto"), model, tokenizer)
    assert auto.dtype == torch.float32 and machine.auto_dtype("auto", "float32") == "float32"  # eval's may say auto
    native(True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert build_sampler(Config().rollout.__class__(backend="hf", dtype="auto"), model, tokenizer).dtype == (
            torch.bfloat16
        )
    assert not [w for w in caught if "without bf16" in str(w.message)]
