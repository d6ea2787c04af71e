"""The encoder-decoder model: encoder, attention, decoder, and their assembly."""
