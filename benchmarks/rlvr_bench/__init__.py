"""The harness behind `rlvr bench`: rlvr's training step against TRL's GRPOTrainer, and its sampler against
vLLM's, each framework in its own child process (its own venv for the peers), alternated step by step.

Not part of the rlvr package: rlvr imports it only when the `bench` verb runs (rlvr.cli.bench).
"""
