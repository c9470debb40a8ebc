"""The PostgreSQL backend (psycopg 3)."""
