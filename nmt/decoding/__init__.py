"""Turning a trained model into text: greedy and beam search (with their top-k and the beam's
trace), forced decoding of a given translation, MBR over a list of candidates, and BLEU/chrF."""
