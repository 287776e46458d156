"""Pure tensor math of the update: advantages, losses, KL, aggregation, and the algorithms as data.

advantages  rewards (B,) + group ids (B,) -> advantages (B,); the dynamic-sampling filter; DAPO's overlong shaping
losses      log-probs (B, T) + advantages (B,) + mask (B, T) -> scalar loss (token / sequence ratios, k3 KL)
presets     GRPO, DAPO, GSPO, Dr. GRPO as values of one frozen dataclass (`Algorithm`)
step_batch  `StepBatch`, the step's batch as one record (tensors and per-row lists), which the update consumes

In: tensors and plain numbers. Out: tensors. Nothing here reads a config file or touches a model.
"""

from rlvr.algorithms.presets import (
    FIELDS,
    OVERLONG,
    PRESETS,
    Algorithm,
    algorithm_from_config,
    get_preset,
    with_overrides,
)

__all__ = ["Algorithm", "PRESETS", "FIELDS", "OVERLONG", "algorithm_from_config", "get_preset", "with_overrides"]
