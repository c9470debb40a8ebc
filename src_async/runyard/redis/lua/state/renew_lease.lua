-- Extends a live lease, keeping its epoch.
-- KEYS: lease ; ARGV: epoch, now, expires_at
local key = KEYS[1]
local lease = redis.call('HMGET', key, 'epoch', 'holder', 'expires_at')
if not lease[2] or tonumber(lease[1]) ~= tonumber(ARGV[1]) then
  return {'lease_lost', 'taken'}
end
if tonumber(lease[3]) < tonumber(ARGV[2]) then
  return {'lease_lost', 'expired'}
end
redis.call('HSET', key, 'expires_at', ARGV[3])
return {'ok', lease[2]}
