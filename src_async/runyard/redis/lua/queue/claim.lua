-- Claims the next item in ONE step: promotes due delayed items, picks the tenant whose turn it
-- is (lowest turn, ties by name; O(log T)), takes its head, leases it with a fresh token and
-- advances the rotation (mirrors MemoryQueueCore.claim).
-- ARGV: worker, now ('' server), lease_seconds, promote batch
local worker, now = ARGV[1], clock(ARGV[2])
local expires = plus(now, ARGV[3])
local due = redis.call('ZRANGEBYSCORE', DELAYED, '-inf', now, 'LIMIT', 0, tonumber(ARGV[4]))
for _, member in ipairs(due) do
  redis.call('ZREM', DELAYED, member)
  local item = string.sub(member, 17)
  local tenant, id = split_item(item)
  enter_line(item, tenant, id)
end
local first = redis.call('ZRANGE', ROTATION, 0, 0)
if #first == 0 then
  return {'empty'}
end
local tenant = first[1]
local member = head(tenant)
redis.call('ZREM', READY, member)
local id = string.sub(member, line_prefix_length(tenant) + 1)
local item = item_field(tenant, id)
local turn = redis.call('HINCRBY', COUNTERS, 'turn', 1)
redis.call('HSET', TURNS, tenant, turn)
if head(tenant) then
  redis.call('ZADD', ROTATION, turn, tenant)
else
  redis.call('ZREM', ROTATION, tenant)
end
local token = redis.call('HINCRBY', COUNTERS, 'token', 1)
redis.call('HINCRBY', ikey(item), 'attempts', 1)
set(item, 'state', 'leased', 'worker', worker, 'expires', expires, 'token', token,
  'claimed', now)
redis.call('ZADD', LEASES, expires, num16(token) .. item)
redis.call('ZADD', WORKERS, 0, seg(worker) .. num16(token) .. item)
return {'ok', item_reply(item, tenant, id)}
