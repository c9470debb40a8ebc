-- Returns lapsed leases (now > expires_at) to ready after the policy's backoff, or to the dead
-- letter, oldest expiry first, at most `limit` per call.
-- KEYS: the queue's keys only. It builds the keys of the items it picks (from the lease index)
--   from the namespace's hash tag, in the queue's slot (see the top of the prelude).
-- ARGV: now ('' server), limit, retry table from ARGV[3] (see attempt_limit() in the prelude)
return reclaim(clock(ARGV[1]), tonumber(ARGV[2]), 3)
