"""The memory backend's pure reference cores (no I/O, no locks); the twins in
``runyard._async.memory`` / ``runyard._sync.memory`` wrap them in their lock."""
