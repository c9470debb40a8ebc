-- Deletes a timer iff its stored fire time is still the one the sweeper read.
-- KEYS: the shard's timers. ARGV: the member, the fire time read. Returns 1 if deleted.
local stored = redis.call('ZSCORE', KEYS[1], ARGV[1])
if stored and tonumber(stored) == tonumber(ARGV[2]) then
  redis.call('ZREM', KEYS[1], ARGV[1])
  return 1
end
return 0
