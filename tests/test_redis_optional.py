"""`import runyard` works without the redis extra; the Redis classes then say how to get it."""

from __future__ import annotations

import subprocess
import sys

# Makes `import redis` (and hiredis) fail as if the extra were not installed.
_BLOCK_REDIS = """
import sys

class _NoRedis:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("redis", "hiredis"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _NoRedis())
"""

_PROBE = """
import runyard, runyard.redis
store = runyard.MemoryStateStore()
assert store is not None
assert "redis" not in sys.modules
try:
    runyard.redis.AsyncRedisStateStore
except ImportError as exc:
    print("ImportError:", exc)
else:
    print("imported")
"""


def test_import_runyard_works_without_redis_and_names_the_extra() -> None:
    result = subprocess.run(
        [sys.executable, "-c", _BLOCK_REDIS + _PROBE],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout.strip()
    assert out.startswith("ImportError:"), out
    assert "runyard[redis]" in out and "AsyncRedisStateStore" in out
