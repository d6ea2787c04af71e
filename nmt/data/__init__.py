"""Parallel data: where pairs come from (TSV files, line-aligned files, given dev/test sets),
the grouped split, multi-reference files, subword tokenizers, batching and fetching archives."""
