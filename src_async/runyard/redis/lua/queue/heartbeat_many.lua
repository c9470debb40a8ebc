-- Extends every lease (each fenced on its own token, never past the lease cap).
-- KEYS: the queue's keys, then every item's.
-- ARGV: now ('' server), lease_seconds, max_lease_seconds, then tenant, id, token per lease
-- Returns per lease {'ok', item} or its refusal ({'not_found'}, {'lease_lost', reason}).
local now, max_lease = clock(ARGV[1]), ARGV[3]
local renew_to = plus(now, ARGV[2])
local out = {}
for at = 4, #ARGV, 3 do
  out[#out + 1] = heartbeat_one(ARGV[at], ARGV[at + 1], ARGV[at + 2], now, renew_to, max_lease)
end
return out
