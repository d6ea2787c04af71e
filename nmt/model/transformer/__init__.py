"""The Transformer family: its settings, network, registry entry, ONNX graphs and CTranslate2 spec."""
