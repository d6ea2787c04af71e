"""The local translation page and its JSON API (``nmt serve``)."""
