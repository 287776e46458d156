"""The sandbox launcher: runs as root (or as the caller), sets up isolation, then execs the target.

Run as `python -I -S _sandbox_launcher.py CONFIG_JSON ARGV...`. It is a separate, single-threaded
process, so unshare(2) and privilege dropping are safe here (they are not in the multi-threaded caller).
Standard library only, so it runs under `-I -S`. Any failure of a requested step exits 125 with a line on
stderr: the sandbox never runs a program with less isolation than the caller asked for.

CONFIG_JSON keys: workdir, uid (int or null), netns, mountns (bools), tmpfs_mb, rlimits ({name: value}),
env ({name: value}).
"""

import ctypes
import json
import os
import resource
import sys

CLONE_NEWNS = 0x00020000
CLONE_NEWNET = 0x40000000
MS_NOSUID, MS_NODEV, MS_BIND, MS_REC, MS_PRIVATE = 2, 4, 4096, 16384, 1 << 18
SANDBOX_CWD = "/tmp/sandbox"  # where the work dir appears inside a private mount namespace
EXIT_SETUP_FAILED = 125
IN_PROCESS = "<python>"  # argv[0] meaning: run argv[1] as a script in this interpreter (saves a start)


def fail(what):
    os.write(2, f"sandbox setup failed: {what}\n".encode())
    os._exit(EXIT_SETUP_FAILED)


def libc_call(libc, name, *args):
    if getattr(libc, name)(*args) != 0:
        fail(f"{name}{args[:2]}: {os.strerror(ctypes.get_errno())}")


def private_mounts(libc, workdir, tmpfs_mb):
    """Fresh tmpfs over the world-writable dirs, with the work dir bound at SANDBOX_CWD; returns the new cwd.

    Writes to /tmp, /var/tmp, /dev/shm, /run/lock then land in tmpfs that vanish with the namespace.
    """
    libc_call(libc, "mount", b"none", b"/", None, MS_REC | MS_PRIVATE, None)
    keep = os.open(workdir, os.O_RDONLY | os.O_DIRECTORY)  # reachable via /proc after /tmp is covered
    opts = f"size={tmpfs_mb}m,mode=1777".encode()
    for d in ("/tmp", "/var/tmp", "/dev/shm", "/run/lock"):
        if os.path.isdir(d):
            libc_call(libc, "mount", b"tmpfs", d.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, opts)
    os.mkdir(SANDBOX_CWD)
    libc_call(libc, "mount", f"/proc/self/fd/{keep}".encode(), SANDBOX_CWD.encode(), None, MS_BIND, None)
    os.close(keep)
    return SANDBOX_CWD


def run_script(argv, env, cwd):
    """Run a Python script here, as `python -I -S script` would with its own dir on sys.path."""
    import runpy

    os.environ.clear()
    os.environ.update(env)
    sys.argv = list(argv)
    sys.path.insert(0, cwd)
    runpy.run_path(argv[0], run_name="__main__")


def main():
    cfg = json.loads(sys.argv[1])
    argv = sys.argv[2:]
    libc = ctypes.CDLL(None, use_errno=True)
    flags = (CLONE_NEWNET if cfg["netns"] else 0) | (CLONE_NEWNS if cfg["mountns"] else 0)
    if flags:
        libc_call(libc, "unshare", flags)
    cwd = private_mounts(libc, cfg["workdir"], cfg["tmpfs_mb"]) if cfg["mountns"] else cfg["workdir"]
    os.chdir(cwd)
    uid = cfg["uid"]
    if uid is not None:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
        if os.getuid() != uid or os.geteuid() != uid:
            fail("uid drop did not take")
    for name, value in cfg["rlimits"].items():
        resource.setrlimit(getattr(resource, name), (value, value))
    os.umask(0o077)
    env = dict(cfg["env"], HOME=cwd, TMPDIR=cwd, PWD=cwd)
    if argv[0] == IN_PROCESS:
        run_script(argv[1:], env, cwd)
        return
    try:
        os.execve(argv[0], argv, env)
    except OSError as e:
        fail(f"exec {argv[0]}: {e}")


if __name__ == "__main__":
    main()
