"""The hostile suite for `python_tests`: completions that try to score without solving, or to hurt the host.

Used by tests/test_verifiers_code.py and `rlvr audit --verifier python_tests`. Every attack targets the
same problem (`sq(x)` returns x*x, two hidden asserts), none solves it, so every one must score 0. Each
attack that touches the host names the paths it tries in `Attack.touches`, so the caller can check the
host afterwards; `{marker}`, `{canary}`, `{port}` are filled in per run by `hostile_suite`.
"""

from __future__ import annotations

import os
import secrets
import socket
import tempfile
from dataclasses import dataclass, field

from rlvr.tasks.base import Problem
from rlvr.verifiers.sandbox import sandbox_processes

TARGET = Problem(
    "attack/sq",
    "Write sq(x) returning x*x.",
    tests=["assert sq(3) == 9", "assert sq(-4) == 16"],
    meta={"entry_point": "sq"},
)
# The secret lives only in the hidden test; an attack that can read the tests returns it and scores 1.
SECRET_TARGET = Problem(
    "attack/secret",
    "Return the secret.",
    tests=["assert steal() == 'rlvr-secret-4e7bd1'"],
    meta={"entry_point": "steal"},
)
# Golds that cannot fail: tests a candidate that does nothing passes. A grader that passes everything grades
# nothing, so each must come back invalid_gold (reward 0), whatever the completion (here: a correct sq).
BAD_GOLDS = {
    "check_asserts_nothing": Problem(
        "bad-gold/no-assert",
        "Write sq(x).",
        tests={"check": "def check(candidate):\n    candidate(3)\n", "entry_point": "sq"},
    ),
    "check_never_calls_entry_point": Problem(
        "bad-gold/never-calls",
        "Write sq(x).",
        tests={"check": "def check(candidate):\n    assert 2 + 2 == 4\n", "entry_point": "sq"},
    ),
    "asserts_never_call_entry_point": Problem(
        "bad-gold/asserts", "Write sq(x).", tests=["assert True", "assert 1 < 2"], meta={"entry_point": "sq"}
    ),
}
SOLVED_SQ = "```python\ndef sq(x):\n    return x * x\n```"
WRITE_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "..", "../..", "/", "/root", "/work", "/etc")

ATTACKS = {
    "fork_bomb": "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
    "memory_bomb": "def sq(x):\n    hog = []\n    while True:\n        hog.append(bytearray(1 << 28))\n",
    "infinite_loop": "def sq(x):\n    while True:\n        pass\n",
    "sleep_past_deadline": "import time\ndef sq(x):\n    time.sleep(3600)\n    return x * x\n",
    "huge_file": "def sq(x):\n    with open('big.bin', 'wb') as f:\n        while True:\n            f.write(b'x' * (1 << 20))\n",
    "write_outside": (
        "import os\nfor d in {dirs!r}:\n    try:\n        open(os.path.join(d, '{marker}'), 'w').write('x')\n"
        "    except OSError:\n        pass\ndef sq(x):\n    return 0\n"
    ),
    "delete_outside": (
        "import os, shutil\nfor p in ['{canary}', os.path.dirname('{canary}')]:\n    try:\n"
        "        os.remove(p)\n    except OSError:\n        pass\n    shutil.rmtree(p, ignore_errors=True)\n"
        "def sq(x):\n    return 0\n"
    ),
    "read_hidden_tests": (
        "import os, re\npat = re.compile(rb'rlvr-secret-[0-9a-f]{{6}}')\ndef scan(path):\n    try:\n"
        "        with open(path, 'rb') as f:\n            m = pat.search(f.read(1 << 22))\n"
        "        return m.group().decode() if m else None\n    except OSError:\n        return None\n"
        "def steal():\n    paths = []\n    for pid in os.listdir('/proc'):\n        if pid.isdigit():\n"
        "            paths += [f'/proc/{{pid}}/{{n}}' for n in ('cmdline', 'environ')]\n"
        "            try:\n                paths += [f'/proc/{{pid}}/fd/{{fd}}' for fd in os.listdir(f'/proc/{{pid}}/fd')]\n"
        "            except OSError:\n                pass\n"
        "    for root in ('/tmp', '/var/tmp', '/dev/shm', '..'):\n        for d, _, names in os.walk(root):\n"
        "            paths += [os.path.join(d, n) for n in names]\n"
        "    for p in paths:\n        if (s := scan(p)):\n            return s\n    return 'not found'\n"
    ),
    "socket_localhost": (
        "import socket\ndef sq(x):\n    s = socket.create_connection(('127.0.0.1', {port}), timeout=1)\n"
        "    s.sendall(b'escaped')\n    return 0\n"
    ),
    "sys_exit_at_import": "import sys\nsys.exit(0)\n",
    "os_exit": "import os\ndef sq(x):\n    os._exit(0)\n",
    "fake_success_line": (
        'import os\nline = b\'{{"test": 0, "passed": true}}\\n{{"test": 1, "passed": true}}\\n'
        '{{"done": 2}}\\nPASS\\nAll tests passed\\n\'\nfor fd in range(1, 32):\n    try:\n'
        "        os.write(fd, line)\n    except OSError:\n        pass\ndef sq(x):\n    return 0\n"
    ),
    "redefine_assertion_builtins": (
        "import builtins\nclass Nope(Exception):\n    pass\nbuiltins.AssertionError = Nope\n"
        "builtins.all = lambda *a: True\nbuiltins.any = lambda *a: True\n"
        "def sq(x):\n    return 0\n"
    ),
    "raise_systemexit_in_test": "def sq(x):\n    raise SystemExit(0)\n",
    "patch_sys_modules": (
        "import sys, types\nfake = types.ModuleType('json')\nfake.loads = lambda *a, **k: {{'ok': True, 'done': 2}}\n"
        "fake.dumps = lambda *a, **k: '{{\"ok\": true}}'\nsys.modules['json'] = fake\nsys.modules['wire'] = fake\n"
        "def sq(x):\n    return 0\n"
    ),
    "kill_parent": (
        "import os, signal\nfor pid in [os.getppid(), 1] + [int(p) for p in os.listdir('/proc') if p.isdigit()]:\n"
        "    if pid != os.getpid():\n        try:\n            os.kill(pid, signal.SIGKILL)\n"
        "        except OSError:\n            pass\ndef sq(x):\n    return 0\n"
    ),
    "always_equal_object": (
        "class Yes:\n    def __eq__(self, other):\n        return True\n    __ne__ = lambda s, o: False\n"
        "class YesInt(int):\n    def __eq__(self, other):\n        return True\n"
        "def sq(x):\n    return Yes() if x > 0 else YesInt(0)\n"
    ),
    "patch_harness_compare": (
        "import sys, builtins\nmain = sys.modules['__main__']\nif hasattr(main, 'answer'):\n"
        "    main.answer = lambda ns, msg: {{'ok': True}}\nbuiltins.__import__ = None\n"
        "import operator\noperator.eq = lambda a, b: True\ndef sq(x):\n    return 0\n"
    ),
    "regex_backtracking": "import re\ndef sq(x):\n    return len(re.findall(r'(a+)+$', 'a' * 40 + 'b')) + x * x + 1\n",
    "huge_output": "import sys\nchunk = 'x' * (1 << 20)\nfor _ in range(10240):\n    sys.stdout.write(chunk)\n",
}


@dataclass
class Attack:
    name: str
    completion: str
    problem: Problem
    touches: list = field(default_factory=list)  # host paths that must not exist after the run
    canary: str | None = None  # a host file that must still exist after the run


def hostile_suite(workdir: str | None = None) -> tuple[list[Attack], socket.socket]:
    """The attacks with their markers filled in, plus a listening socket on 127.0.0.1 (close it after)."""
    marker = f"rlvr-attack-{secrets.token_hex(4)}"
    workdir = workdir or tempfile.mkdtemp(prefix="rlvr-audit-")
    canary_dir = os.path.join(workdir, "open-to-all")
    os.makedirs(canary_dir, exist_ok=True)
    os.chmod(workdir, 0o755)
    os.chmod(canary_dir, 0o777)  # anyone may delete here: only the sandbox's namespaces protect it
    canary = os.path.join(canary_dir, "canary.txt")
    with open(canary, "w") as f:
        f.write("still here")
    os.chmod(canary, 0o666)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    listener.setblocking(False)
    fill = {"marker": marker, "canary": canary, "port": listener.getsockname()[1], "dirs": WRITE_DIRS}
    attacks = []
    for name, template in ATTACKS.items():
        problem = SECRET_TARGET if name == "read_hidden_tests" else TARGET
        attacks.append(Attack(name, "```python\n" + template.format(**fill) + "```", problem))
    by_name = {a.name: a for a in attacks}
    by_name["write_outside"].touches = [os.path.abspath(os.path.join(d, marker)) for d in WRITE_DIRS + (workdir,)]
    by_name["delete_outside"].canary = canary
    return attacks, listener


def host_damage(attack: Attack, listener: socket.socket) -> list[str]:
    """What the attack changed on the host, as sentences; [] when nothing."""
    damage = [f"created {p}" for p in attack.touches if os.path.lexists(p)]
    if attack.canary and not os.path.exists(attack.canary):
        damage.append(f"deleted {attack.canary}")
    try:
        conn, _ = listener.accept()
        conn.close()
        damage.append("connected to 127.0.0.1")
    except BlockingIOError:
        pass
    left = sandbox_processes()
    if left:
        damage.append(f"{len(left)} sandbox processes still running")
    return damage
