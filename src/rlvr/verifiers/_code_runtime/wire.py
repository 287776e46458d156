"""Plain-data wire format between the judge and the candidate (copied into both sandboxes).

Only exact builtin types travel: None, bool, int, float, str as JSON scalars; list, tuple, set,
frozenset, dict, bytes, complex as tagged objects. The judge decodes into fresh builtin objects, so
whatever the candidate sends, the judge never holds a candidate-made object (no custom __eq__, no
subclass, no pickle): the worst a candidate can send is a wrong value.
"""

import json

MAX_LINE = 8 << 20  # bytes; a longer message is a failed call, never a partial one
SCALARS = (type(None), bool, int, float, str)
TAGS = {list: "list", tuple: "tuple", set: "set", frozenset: "frozenset"}
BUILD = {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}


def encode(x, depth=0):
    if depth > 100:
        raise ValueError("value nested too deep")
    t = type(x)
    if t in SCALARS:
        return x
    if t in TAGS:
        return {"t": TAGS[t], "v": [encode(v, depth + 1) for v in x]}
    if t is dict:
        return {"t": "dict", "v": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in x.items()]}
    if t is bytes:
        return {"t": "bytes", "v": x.hex()}
    if t is complex:
        return {"t": "complex", "v": [x.real, x.imag]}
    raise TypeError(f"cannot send a value of type {t.__name__}")


def decode(x, depth=0):
    if depth > 100:
        raise ValueError("value nested too deep")
    t = type(x)
    if t in SCALARS:
        return x
    if t is not dict or type(x.get("t")) is not str:
        raise ValueError("malformed value")
    tag, v = x["t"], x.get("v")
    if tag in BUILD and type(v) is list:
        return BUILD[tag](decode(i, depth + 1) for i in v)
    if tag == "dict" and type(v) is list:
        return {decode(k, depth + 1): decode(w, depth + 1) for k, w in v}
    if tag == "bytes" and type(v) is str:
        return bytes.fromhex(v)
    if tag == "complex" and type(v) is list and len(v) == 2 and all(type(i) is float for i in v):
        return complex(v[0], v[1])
    raise ValueError("malformed value")


def send(f, msg):
    f.write(json.dumps(msg).encode() + b"\n")
    f.flush()


def receive(f):
    """The next message, or None at end of stream; raises ValueError on an oversized or malformed one."""
    line = f.readline(MAX_LINE + 1)
    if not line:
        return None
    if len(line) > MAX_LINE or not line.endswith(b"\n"):
        raise ValueError("message too long")
    msg = json.loads(line)
    if type(msg) is not dict:
        raise ValueError("malformed message")
    return msg
