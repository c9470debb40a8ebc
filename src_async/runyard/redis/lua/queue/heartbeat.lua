-- Extends a lease, fenced on its token, never past the lease cap.
-- KEYS: the queue's keys, then the item's.
-- ARGV: tenant, id, token, now ('' server), lease_seconds, max_lease_seconds
local now = clock(ARGV[4])
return heartbeat_one(ARGV[1], ARGV[2], ARGV[3], now, plus(now, ARGV[5]), ARGV[6])
