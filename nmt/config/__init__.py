"""The one YAML config: its typed schema and validation (schema.py), where a run keeps its
files (paths.py), and the reference page written from the schema (reference.py)."""
