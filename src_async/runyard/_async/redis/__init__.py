"""The Redis backend (redis-py, Redis Cluster included)."""
