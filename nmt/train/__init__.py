"""Training: the step, the epoch, the run loop, and checkpoints."""
