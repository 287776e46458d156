"""Peak memory and time of selective_log_softmax against the full float32 log-softmax, forward + backward.

Each variant runs in its own process so the peak resident set size (ru_maxrss) is its own.
Usage: PYTHONPATH=src python benchmarks/bench_log_softmax.py [rows] [vocab]
Prints figures; asserts nothing.
"""

import resource
import subprocess
import sys
import time


def run_one(variant: str, rows: int, vocab: int) -> None:
    import torch

    from rlvr.algorithms.losses import selective_log_softmax

    torch.manual_seed(0)
    logits = torch.randn(rows, vocab).to(torch.bfloat16).requires_grad_()
    ids = torch.randint(0, vocab, (rows,))
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    if variant == "full":
        logp = torch.log_softmax(logits.float(), -1).gather(-1, ids[:, None])[:, 0]
    else:
        logp = selective_log_softmax(logits, ids)
    logp.sum().backward()
    elapsed = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"{variant:>9}: +{(peak - base) / 1024:7.0f} MiB peak RSS over the inputs, {elapsed:6.2f} s")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in ("full", "chunked"):
        run_one(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
    else:
        rows = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
        vocab = int(sys.argv[2]) if len(sys.argv) > 2 else 49152
        print(f"rows={rows} vocab={vocab}: bf16 logits {rows * vocab * 2 / 2**20:.0f} MiB")
        for variant in ("full", "chunked"):
            subprocess.run([sys.executable, __file__, variant, str(rows), str(vocab)], check=True)
