-- Releases a lease if it is still the given epoch; the epoch itself is kept for fencing.
-- KEYS: lease ; ARGV: epoch
local key = KEYS[1]
local lease = redis.call('HMGET', key, 'epoch', 'holder')
if not lease[2] or tonumber(lease[1]) ~= tonumber(ARGV[1]) then
  return 0
end
redis.call('HDEL', key, 'holder', 'expires_at')
return 1
