"""Parallel data: reading Anki/Tatoeba TSV, the grouped split, multi-reference files, batching,
and fetching archives."""
