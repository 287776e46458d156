"""The sandbox on its own: limits bind, the deadline kills everything, the host is left alone."""

import os
import threading

import pytest

from rlvr.verifiers.sandbox import Limits, isolation, run_sandboxed, sandbox_processes

FAST = Limits(cpu_s=2, wall_s=2.0, memory_mb=256, file_mb=1, processes=8, output_bytes=1000)
ISO = isolation()


def test_runs_code_with_files_and_stdin():
    res = run_sandboxed("import sys\nprint(open('data.txt').read() + sys.stdin.read())", {"data.txt": "ab"}, "cd", FAST)
    assert (res.returncode, res.stdout, res.timed_out, res.killed_by) == (0, b"abcd\n", False, None)


def test_environment_is_scrubbed_and_cwd_is_fresh():
    os.environ["RLVR_SECRET_FOR_TEST"] = "x"
    res = run_sandboxed("import os\nprint(sorted(os.environ))\nprint(os.listdir('.'))", limits=FAST)
    names, listing = res.stdout.decode().splitlines()
    assert "RLVR_SECRET_FOR_TEST" not in names and "HOME" in names
    assert listing == "['main.py']"


@pytest.mark.skipif(not ISO["uid"], reason="needs root to drop to a private uid")
def test_runs_as_a_private_unprivileged_uid():
    res = run_sandboxed("import os\nprint(os.getuid(), os.geteuid(), os.getgroups())", limits=FAST)
    uid, euid, groups = res.stdout.decode().split(" ", 2)
    assert int(uid) == int(euid) >= 1 << 20 and groups.strip() == "[]"


@pytest.mark.parametrize(
    "code,killed_by,timed_out",
    [
        ("while True: pass", "deadline", False),  # CPU limit 2 s vs wall 2 s: either may come first, checked below
        ("import time; time.sleep(30)", "deadline", True),
        ("print('x' * 100000)", "output_limit", False),
    ],
)
def test_limits_bind(code, killed_by, timed_out):
    res = run_sandboxed(code, limits=FAST)
    if code.startswith("while"):
        assert res.killed_by in ("deadline", "signal:SIGKILL", "signal:SIGXCPU")
    else:
        assert res.killed_by == killed_by and res.timed_out == timed_out
    assert res.wall_s < 5 and len(res.stdout) <= FAST.output_bytes
    assert sandbox_processes() == []


def test_file_size_limit():
    # Python ignores SIGXFSZ, so the write past RLIMIT_FSIZE fails with EFBIG instead of killing
    res = run_sandboxed("open('f', 'wb').write(b'x' * (2 << 20))", limits=FAST)
    assert res.returncode == 1 and b"File too large" in res.stderr


def test_memory_limit_raises_memory_error():
    res = run_sandboxed("x = bytearray(1 << 30)", limits=FAST)
    assert res.returncode == 1 and b"MemoryError" in res.stderr


@pytest.mark.skipif(not ISO["uid"], reason="RLIMIT_NPROC binds only with a private uid")
def test_fork_bomb_is_capped_and_nothing_outlives_the_run():
    code = (
        "import os, time\nn = 0\nfor _ in range(100):\n    try:\n        if os.fork() == 0:\n"
        "            os.setsid(); time.sleep(60); os._exit(0)\n        n += 1\n    except OSError:\n        pass\nprint(n)"
    )
    res = run_sandboxed(code, limits=FAST)
    assert res.returncode == 0 and int(res.stdout) < FAST.processes  # children counted against one uid
    assert sandbox_processes() == []  # the setsid'd sleepers were found by uid and killed


@pytest.mark.skipif(not ISO["netns"], reason="no network namespace on this machine")
def test_no_network():
    res = run_sandboxed("import socket\nsocket.create_connection(('127.0.0.1', 22), timeout=1)", limits=FAST)
    assert b"Network is unreachable" in res.stderr


@pytest.mark.skipif(not ISO["mountns"], reason="no mount namespace on this machine")
def test_tmp_writes_do_not_reach_the_host():
    name = f"rlvr-sbx-test-{os.getpid()}"
    res = run_sandboxed(f"open('/tmp/{name}', 'w').write('x')\nprint('ok')", limits=FAST)
    assert res.stdout == b"ok\n" and not os.path.exists(f"/tmp/{name}")


def test_stop_event_ends_a_run_early():
    stop = threading.Event()
    threading.Timer(0.3, stop.set).start()
    res = run_sandboxed("import time; time.sleep(30)", limits=FAST, stop=stop)
    assert res.killed_by == "stopped" and res.wall_s < 1.5


def test_passed_fds_are_closed_here():
    r, w = os.pipe()
    run_sandboxed(f"import os\nos.write({w}, b'hi')", limits=FAST, pass_fds=(w,), close_passed=True)
    assert os.read(r, 10) == b"hi" and os.read(r, 10) == b""  # EOF: no copy of w left in this process
    os.close(r)
