-- Releases a lease if it is still the given epoch; the epoch itself is kept for fencing.
-- KEYS: lease ; ARGV: epoch, release id (minted per call)
-- `released_by` keeps the id of the last release that applied, so a caller whose reply was
-- lost reads it back to learn whether its own release did.
local key = KEYS[1]
local lease = redis.call('HMGET', key, 'epoch', 'holder')
if not lease[2] or tonumber(lease[1]) ~= tonumber(ARGV[1]) then
  return 0
end
redis.call('HDEL', key, 'holder', 'expires_at')
redis.call('HSET', key, 'released_by', ARGV[2])
return 1
