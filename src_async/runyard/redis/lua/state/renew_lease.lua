-- Extends a live lease, keeping its epoch.
-- KEYS: lease ; ARGV: epoch, now ('' server time), ttl seconds
-- Returns {'ok', holder, expires_at}, expires_at = now + ttl.
local key = KEYS[1]
local now = clock(ARGV[2])
local lease = redis.call('HMGET', key, 'epoch', 'holder', 'expires_at')
if not lease[2] or tonumber(lease[1]) ~= tonumber(ARGV[1]) then
  return {'lease_lost', 'taken'}
end
if tonumber(lease[3]) < tonumber(now) then
  return {'lease_lost', 'expired'}
end
local expires = plus(now, ARGV[3])
redis.call('HSET', key, 'expires_at', expires)
return {'ok', lease[2], expires}
