-- Leases a run to a holder: a live lease of another holder refuses, a lapsed one is replaced
-- with the next epoch (mirrors MemoryStateCore.acquire_lease).
-- KEYS: lease ; ARGV: holder, now, expires_at
local key = KEYS[1]
local lease = redis.call('HMGET', key, 'epoch', 'holder', 'expires_at')
local epoch
if lease[2] and tonumber(lease[3]) >= tonumber(ARGV[2]) then
  if lease[2] ~= ARGV[1] then
    return {'held', lease[2], tonumber(lease[1]), lease[3]}
  end
  epoch = tonumber(lease[1])
else
  epoch = redis.call('HINCRBY', key, 'epoch', 1)
end
redis.call('HSET', key, 'holder', ARGV[1], 'expires_at', ARGV[3])
return {'ok', epoch}
