"""The update hands freed pages back to the OS only when the process grew (rlvr.policy.memory)."""

from __future__ import annotations

import pytest

from rlvr.policy import memory


def test_trims_only_past_the_growth_bound_and_measures_afresh_after_a_trim():
    policy = memory.TrimOnGrowth(growth=0.10)
    # baseline 1000 (the first call); 1100 is not past +10%; 1101 is: trim, and the next call is the new baseline
    sizes = [1000, 1050, 1100, 1101, 900, 980, 990, 1000]
    assert [policy.after_call(s) for s in sizes] == [False, False, False, True, False, False, False, True]


def test_the_default_bound_is_ten_percent():
    policy = memory.TrimOnGrowth()
    assert policy.after_call(2_000_000_000) is False
    assert policy.after_call(2_199_000_000) is False
    assert policy.after_call(2_201_000_000) is True


@pytest.mark.skipif(memory._libc() is None or memory.resident_bytes() is None, reason="glibc's malloc_trim, /proc")
def test_malloc_trim_hands_back_the_pages_of_fragmented_frees():
    # 64 KiB blocks come from the heap (below the mmap threshold); keeping every other one alive stops the freed ones
    # merging into the heap's top, which glibc would trim itself: only malloc_trim returns their pages.
    blocks = [b"x" * 65536 for _ in range(2048)]  # 128 MiB, touched
    kept = blocks[1::2]
    del blocks
    before = memory.resident_bytes()
    memory._libc().malloc_trim(0)
    after = memory.resident_bytes()
    assert before - after > 48 * 2**20  # most of the 64 MiB freed in holes
    del kept  # alive until the measurement: its blocks keep the freed ones apart


def test_the_decorated_function_keeps_its_result_and_its_errors():
    calls = []

    @memory.returns_freed_memory
    def f(x):
        calls.append(x)
        if x < 0:
            raise ValueError("negative")
        return 2 * x

    assert f(3) == 6
    with pytest.raises(ValueError, match="negative"):
        f(-1)
    assert calls == [3, -1]
