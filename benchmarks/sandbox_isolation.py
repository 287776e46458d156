"""Print what a sandboxed program can and cannot do on this machine, and the cost of one run (docs/sandbox.md)."""

import time

from rlvr.verifiers.sandbox import Limits, isolation, run_sandboxed

print(isolation())  # what the probe found
code = r"""
import os, socket
def can(f):
    try: f(); return "yes"
    except Exception as e: return "no (" + type(e).__name__ + ")"
print("uid", os.getuid(), "cwd", os.getcwd())
print("visible processes", sum(1 for p in os.listdir('/proc') if p.isdigit()))
print("read /proc/1/cmdline", can(lambda: open('/proc/1/cmdline').read()))
print("read /proc/1/environ", can(lambda: open('/proc/1/environ').read()))
print("read /etc/passwd", can(lambda: open('/etc/passwd').read()))
print("read /work/main/pyproject.toml", can(lambda: open('/work/main/pyproject.toml').read()))
print("list /root", can(lambda: os.listdir('/root')))
print("write /work/x", can(lambda: open('/work/rlvr-meas-x','w')))
print("write /tmp/x (private tmpfs)", can(lambda: open('/tmp/rlvr-meas-x','w')))
print("kill 1", can(lambda: os.kill(1, 0)))
print("socket 127.0.0.1", can(lambda: socket.create_connection(('127.0.0.1', 22), timeout=1)))
print("socket 8.8.8.8", can(lambda: socket.create_connection(('8.8.8.8', 53), timeout=1)))
print("interfaces", os.listdir('/sys/class/net'))
"""
r = run_sandboxed(code, limits=Limits())
print(r.stdout.decode(), r.stderr.decode()[-500:])
t = time.time()
for _ in range(20):
    run_sandboxed("pass")
print("single run wall s", (time.time() - t) / 20)
