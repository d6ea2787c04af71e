"""Reading, splitting and batching parallel data."""
