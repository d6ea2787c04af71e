"""A trained model's life outside training: checkpoints written and read, runs and packages
loaded into an engine (PyTorch or ONNX Runtime), and a parent model read for transfer."""
