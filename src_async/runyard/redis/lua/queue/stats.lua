-- Counts items by state; due items not yet promoted count as ready.
-- KEYS: the queue's keys only (it reads no item).
-- ARGV: now ('' server), scan (how many due items at most are read to find their tenants)
-- Due items are counted with ZCOUNT, never fetched; only the first `scan` of them are read to
-- count the tenants that have ready work only through them (claims promote due items in
-- batches of the same size, so more rarely wait). So `tenants` is exact while at most `scan`
-- due items wait for promotion; past that it misses the tenants whose due items are all
-- behind the first `scan` (low, never high; docs/redis.md, "Round trips").
local now = clock(ARGV[1])
local due_count = redis.call('ZCOUNT', DELAYED, '-inf', now)
local tenants = redis.call('ZCARD', ROTATION)
if due_count > 0 then
  local due = redis.call('ZRANGEBYSCORE', DELAYED, '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))
  local seen = {}
  for _, member in ipairs(due) do
    local tenant = split_item(string.sub(member, 6))
    if not seen[tenant] and not redis.call('ZSCORE', ROTATION, tenant) then
      seen[tenant] = true
      tenants = tenants + 1
    end
  end
end
return {
  tonumber(redis.call('HGET', COUNTERS, 'ready') or 0) + due_count,
  redis.call('ZCOUNT', DELAYED, '(' .. now, '+inf'),
  redis.call('ZCARD', LEASES),
  redis.call('ZCARD', DEAD),
  tenants,
}
