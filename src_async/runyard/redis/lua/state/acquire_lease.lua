-- Leases a run to a holder: a live lease of another holder refuses, a lapsed one is replaced
-- with the next epoch (mirrors MemoryStateCore.acquire_lease).
-- KEYS: lease, the tenant's lease floor ; ARGV: holder, now ('' server time), ttl seconds
-- A new epoch is above the run's last one and above the floor prune_leases leaves behind.
-- Returns {'ok', epoch, expires_at}, expires_at = now + ttl.
local key = KEYS[1]
local now = clock(ARGV[2])
local expires = plus(now, ARGV[3])
local lease = redis.call('HMGET', key, 'epoch', 'holder', 'expires_at')
local epoch
if lease[2] and tonumber(lease[3]) >= tonumber(now) then
  if lease[2] ~= ARGV[1] then
    return {'held', lease[2], tonumber(lease[1]), lease[3]}
  end
  epoch = tonumber(lease[1])
else
  local floor = tonumber(redis.call('GET', KEYS[2]) or '0')
  epoch = math.max(tonumber(lease[1] or '0'), floor) + 1
  redis.call('HSET', key, 'epoch', epoch)
end
redis.call('HSET', key, 'holder', ARGV[1], 'expires_at', expires)
return {'ok', epoch, expires}
