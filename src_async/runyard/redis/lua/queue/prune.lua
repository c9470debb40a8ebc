-- Forgets the rotation entries of up to `limit` tenants that hold no item in any state (IDLE
-- lists them as their last item goes, scored by turn), least recently served first, ties by
-- name. ARGV: limit. Returns how many tenants were forgotten.
-- KEYS: the queue's keys only (it reads no item).
local idle = redis.call('ZRANGE', IDLE, 0, tonumber(ARGV[1]) - 1)
local pruned = 0
for _, tenant in ipairs(idle) do
  redis.call('ZREM', IDLE, tenant)
  if redis.call('HEXISTS', TENANTS, tenant) == 0 then
    pruned = pruned + redis.call('HDEL', TURNS, tenant)
    redis.call('ZREM', ROTATION, tenant)
  end
end
return pruned
