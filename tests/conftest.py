"""Shared test configuration; backend fixtures live in tests/support/*_plugin.py."""

from hypothesis import settings

pytest_plugins = [
    "tests.support.redis_plugin",
    "tests.support.postgres_plugin",
]

# Every Hypothesis test searches the same examples on every run and machine (no random seed, no
# example database carried between runs): a test passes or fails on the code, never by luck.
settings.register_profile("runyard", derandomize=True, database=None)
settings.load_profile("runyard")
