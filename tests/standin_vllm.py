"""A stand-in for a vLLM server on 127.0.0.1: a real HTTP server (http.server in a thread) that speaks the
subset of vLLM's OpenAI-compatible protocol the remote backend uses, and answers deterministically.

- POST /v1/completions: token-id prompt, n samples; sample j of prompt p is `fixed_completion(p, j, ...)`,
  a function of the prompt and j only (the seed is ignored), so any split of prompts over servers or ranks
  sees the same rollouts. Tokens come back as "token_id:N" strings with their log-probs, as vLLM does.
- POST /v1/load_lora_adapter, /v1/unload_lora_adapter: records the adapter (its folder must hold
  adapter_config.json); a completion naming an adapter that is not loaded gets 404, as in vLLM.
- POST /v1/completions with `prompt_logprobs` (a distillation teacher's request, rlvr.sampling.remote_teacher): each
  prompt position's entry holds the log-prob of the id standing there, under the scorer's model (None at position 0),
  as vLLM sends them; POST /tokenize: the ids of a text under `tokenizer`.
- `max_model_len=L`: /v1/models lists it, and a prompt of L ids or more is refused with HTTP 400 (vLLM 0.32 cuts
  max_tokens to L - len(prompt), then refuses 0).
- `engine_dead=True`: every completion request gets vLLM's HTTP 500 of a dead engine (what a teacher server started
  with --enable-lora sends after two prompt_logprobs requests met in one step; tests/test_engines_vllm.py).
- `die_after=k`: after k completion requests the server drops the connection of the next one without a
  reply and stops listening: a server lost mid-batch.
"""

from __future__ import annotations

import json
import random
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

BASE_MODEL = "standin-base"


def fixed_completion(prompt: list[int], j: int, max_tokens: int, stop_ids: list[int]):
    """(token ids, log-probs, finish_reason): about 60% end on a stop id, the rest run to max_tokens."""
    rng = random.Random(f"{prompt}|{j}")
    if stop_ids and rng.random() < 0.6:
        length = rng.randint(1, max_tokens)
        tokens = [rng.randrange(300, 2000) for _ in range(length - 1)] + [stop_ids[0]]
        finish = "stop"
    else:
        tokens = [rng.randrange(300, 2000) for _ in range(max_tokens)]
        finish = "length"
    return tokens, [-0.05 * (1 + t % 13) for t in tokens], finish


class StandinServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self, die_after: int | None = None, scorer=None, tokenizer=None, max_model_len=None, engine_dead=False
    ):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.max_model_len, self.engine_dead = max_model_len, engine_dead
        self.tokenizer = tokenizer  # /tokenize's
        self.die_after, self.completions, self.served, self.adapters, self.log = die_after, 0, 0, {}, []
        self.scorer = scorer  # (prompt, tokens, temperature) -> log-probs, as a server of that model would send
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest output clean
        pass

    def _reply(self, code: int, body: dict | str) -> None:
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain" if isinstance(body, str) else "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/v1/models":
            base = {
                "id": BASE_MODEL,
                **({"max_model_len": self.server.max_model_len} if self.server.max_model_len else {}),
            }
            return self._reply(200, {"data": [base, *({"id": a} for a in self.server.adapters)]})
        self._reply(404, {"error": "not found"})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        server = self.server
        server.log.append((self.path, body))
        if self.path == "/v1/load_lora_adapter":
            if not (Path(body["lora_path"]) / "adapter_config.json").exists():
                return self._reply(400, {"error": f"no adapter at {body['lora_path']}"})
            if body["lora_name"] in server.adapters and not body.get("load_inplace"):  # as vLLM 0.32 refuses it
                return self._reply(
                    400,
                    {
                        "error": {
                            "message": f"The lora adapter '{body['lora_name']}' has already "
                            "been loaded. If you want to load the adapter in place, set "
                            "'load_inplace' to True.",
                            "code": 400,
                        }
                    },
                )
            server.adapters[body["lora_name"]] = body["lora_path"]  # vLLM 0.32 answers these two in plain text
            return self._reply(200, f"Success: LoRA adapter '{body['lora_name']}' added successfully.")
        if self.path == "/v1/unload_lora_adapter":
            server.adapters.pop(body["lora_name"], None)
            return self._reply(200, f"Success: LoRA adapter '{body['lora_name']}' removed successfully.")
        if self.path == "/tokenize" and server.tokenizer is not None:
            ids = server.tokenizer(body["prompt"], add_special_tokens=body.get("add_special_tokens", True))["input_ids"]
            return self._reply(200, {"tokens": ids, "count": len(ids)})
        if self.path != "/v1/completions":
            return self._reply(404, {"error": "not found"})
        with server.lock:
            server.completions += 1
            dying = server.die_after is not None and server.completions > server.die_after
        if dying:  # crash: no reply on this connection, and nobody listening from now on
            self.close_connection = True
            threading.Thread(target=server.stop, daemon=True).start()
            self.connection.close()
            return
        if body["model"] not in server.adapters and body["model"] != BASE_MODEL:
            return self._reply(404, {"error": f"The model `{body['model']}` does not exist."})
        if server.engine_dead:
            why = "EngineCore encountered an issue. See stack trace (above) for the root cause."
            return self._reply(500, {"error": {"message": why, "type": "InternalServerError", "code": 500}})
        if server.max_model_len and len(body["prompt"]) >= server.max_model_len:
            n, most = len(body["prompt"]), server.max_model_len
            why = "max_tokens must be at least 1, got 0." if n == most else f"{n} prompt tokens, more than {most}"
            return self._reply(400, {"error": {"message": why, "type": "BadRequestError", "code": 400}})
        if body.get("prompt_logprobs") is not None:  # a teacher's scoring: the prompt's own ids, each position's
            ids = body["prompt"]
            logps = server.scorer(ids[:1], ids[1:], 1.0)
            entries = [None] + [{str(t): {"logprob": lp, "rank": 1}} for t, lp in zip(ids[1:], logps)]
            with server.lock:
                server.served += 1
            return self._reply(200, {"choices": [{"index": 0, "text": "", "prompt_logprobs": entries}]})
        choices = []
        for j in range(body.get("n", 1)):
            tokens, logps, finish = fixed_completion(body["prompt"], j, body["max_tokens"], body["stop_token_ids"])
            if server.scorer is not None:
                logps = server.scorer(body["prompt"], tokens, body["temperature"])
            choices.append(
                {
                    "index": j,
                    "text": "",
                    "finish_reason": finish,
                    "logprobs": {"tokens": [f"token_id:{t}" for t in tokens], "token_logprobs": logps},
                }
            )
        with server.lock:  # counted before the reply goes out: a client that has it may read the count at once
            server.served += 1
        self._reply(200, {"object": "text_completion", "model": body["model"], "choices": choices})


def model_scorer(folder, tempered: bool = True):
    """A scorer for StandinServer: the log-probs the model in `folder` (a folder, or the model) gives the tokens, at
    the request's temperature (what a vLLM server of that model sends with --logprobs-mode processed_logprobs;
    tempered=False: untempered, vLLM's default raw_logprobs), so the remote sampler's check that a server serves the
    policy's base model meets what it would meet against the real one."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(folder)).eval() if isinstance(folder, (str, Path)) else folder
    lock = threading.Lock()  # the server answers requests on several threads; one forward at a time

    def score(prompt, tokens, temperature):
        ids = torch.tensor([list(prompt) + list(tokens)])
        with torch.no_grad(), lock:
            logits = model(ids).logits[0, len(prompt) - 1 : -1].float() / (max(temperature, 1e-3) if tempered else 1)
        return logits.log_softmax(-1).gather(-1, torch.tensor(tokens)[:, None])[:, 0].tolist()

    return score
