"""PostgreSQL fixtures for both twins (filled in by the PostgreSQL backend work)."""
