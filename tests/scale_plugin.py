"""An advantage scale written outside rlvr (tests/test_advantages.py names it `scale_plugin:batch_range`): it divides
by the range of the whole batch's rewards, so it works only if a plug-in gets the batch's rewards as `batch` does."""


def batch_range(rewards, group_std, batch_rewards):
    """max - min of every reward in the step's batch (every rank's under data parallel)."""
    return batch_rewards.max() - batch_rewards.min()
