-- Adds an item; an existing id or a live dedupe key returns the existing item instead.
-- ARGV: tenant, id, dedupe ('' none), payload, priority, priority key, now ('' server),
--       delay seconds
local tenant, id, dedupe, now = ARGV[1], ARGV[2], ARGV[3], clock(ARGV[7])
local item = item_field(tenant, id)
if get(item, 'state') then
  return {'exists', item_reply(item, tenant, id)}
end
local dedupe_field = seg(tenant) .. seg(dedupe)
if dedupe ~= '' then
  local other = redis.call('HGET', DEDUPE, dedupe_field)
  if other then
    return {'exists', item_reply(item_field(tenant, other), tenant, other)}
  end
  redis.call('HSET', DEDUPE, dedupe_field, id)
  set(item, 'dedupe', dedupe)
end
local available = plus(now, ARGV[8])
store_payload(item, ARGV[4])
set(item, 'priority', ARGV[5], 'pkey', ARGV[6], 'state', 'ready',
  'attempts', 0, 'available', available, 'enqueued', now)
redis.call('HSETNX', TURNS, tenant, redis.call('HGET', COUNTERS, 'turn') or 0)
make_ready(item, tenant, id, available, now)
return {'created', item_reply(item, tenant, id)}
