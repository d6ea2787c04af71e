"""What leaves a run: a model package (export), its ONNX graphs, and the offline page."""
