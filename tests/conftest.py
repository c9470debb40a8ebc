"""Shared test configuration; backend fixtures live in tests/support/*_plugin.py."""

pytest_plugins = [
    "tests.support.redis_plugin",
    "tests.support.postgres_plugin",
]
