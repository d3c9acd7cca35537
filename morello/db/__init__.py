"""The memo table: Specs as coordinates, solutions as boxes, persisted in SQLite."""
