"""Redis fixtures for both twins (filled in by the Redis backend work)."""
