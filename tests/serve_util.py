"""A real `rlvr serve` in a subprocess on 127.0.0.1 (a free port), for the serve tests; stopped in teardown.

with Service("--task", "arithmetic") as s:
    status, body, headers = s.post("/v1/verify", {"items": [...]})
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

RLVR = str(Path(sys.executable).parent / "rlvr")
START_S = 90.0


class Service:
    def __init__(self, *args: str, token: str | None = None, env: dict | None = None, port: int = 0):
        self.args, self.token = list(args), token
        self.lines: list[str] = []
        self.proc = subprocess.Popen(
            [RLVR, "serve", "--port", str(port), *self.args],
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
            env={**os.environ, **(env or {})},
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.url = self._wait_listening()

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    def _wait_listening(self) -> str:
        deadline = time.monotonic() + START_S
        while time.monotonic() < deadline:
            for line in self.lines:
                if "listening on " in line:
                    return line.split("listening on ", 1)[1].split(" ", 1)[0]
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.close()
        raise RuntimeError(f"rlvr serve did not start: {self.lines}")

    def post(self, path: str, body, token: str | None = "default", headers: dict | None = None, timeout: float = 120):
        """(status, parsed JSON body or text, response headers); `body` is JSON-encoded unless bytes."""
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        return self.request(path, data, token, headers, timeout)

    def get(self, path: str, token: str | None = "default"):
        return self.request(path, None, token, None, 30)

    def request(self, path, data, token, headers, timeout):
        token = self.token if token == "default" else token
        h = {"Content-Type": "application/json", **(headers or {})}
        if token:
            h["Authorization"] = f"Bearer {token}"
        method = "POST" if data is not None else "GET"
        req = urllib.request.Request(self.url + path, data=data, headers=h, method=method)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, _parse(r.read()), dict(r.headers)
        except urllib.error.HTTPError as e:
            return e.code, _parse(e.read()), dict(e.headers)

    def metric(self, name: str) -> float:
        """One sample of /metrics by its full name with labels, e.g. 'rlvr_serve_items_total{...}' (0 if absent)."""
        _, text, _ = self.get("/metrics")
        for line in text.splitlines():
            if line.startswith(name + " "):
                return float(line.rsplit(" ", 1)[1])
        return 0.0

    def children(self) -> list[int]:
        return children_of(self.proc.pid)

    def stop(self, sig=signal.SIGTERM, timeout: float = 60) -> int:
        self.proc.send_signal(sig)
        return self.proc.wait(timeout=timeout)

    def close(self) -> None:
        """SIGTERM (the service closes its pools), then SIGKILL if it has not stopped within 20 s."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _parse(raw: bytes):
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace")


def children_of(pid: int) -> list[int]:
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                if int(fields[1]) == pid and fields[0] != "Z":
                    out.append(int(name))
            except (OSError, ValueError, IndexError):
                pass
    return out


def wait_for(check, timeout: float = 30.0, every: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(every)
    return False


def kill(pids) -> None:
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass
