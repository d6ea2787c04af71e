"""The RNN family (Bahdanau's and Luong's encoder-decoders): its settings, cells, encoder,
attentions, decoders, registry entry and ONNX graphs."""
