"""Training: the ``Trainer`` (trainer.py) and the parts it holds — one update (step.py), the
optimizer and schedule (optim.py), validation, data, progress and RNG state, the metrics
file, the log, data parallelism and TensorBoard."""
