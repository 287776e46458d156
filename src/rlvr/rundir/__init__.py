"""What a run leaves on disk, written atomically: config, metrics and samples lines, checkpoints.

files       the run directory: atomic writes, metrics.jsonl and samples.jsonl, truncation on resume
checkpoint  atomic checkpoints with a checksum manifest; exact resume
trackers    the same lines (and samples, config, held-out tables, plots) to TensorBoard, MLflow, trackio, W&B

In: rows and model state. Out: files a person can read, plot, resume or delete whole.
"""
