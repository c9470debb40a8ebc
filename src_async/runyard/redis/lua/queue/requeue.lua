-- Moves a dead-lettered item back to ready with its attempts reset.
-- KEYS: the queue's keys, then the item's and its tenant's line.
-- ARGV: tenant, id, now ('' server)
local tenant, id, now = ARGV[1], ARGV[2], clock(ARGV[3])
local item = item_field(tenant, id)
if get(item, 's') ~= 'd' then
  return {'not_found'}
end
redis.call('ZREM', DEAD, seg(tenant) .. time_key(get(item, 'dt')) .. id)
clear(item, 's', 'dr', 'dt', 'a')
set(item, 'v', now)
if make_ready(item, tenant, id, now, now) then
  wake(1)
end
return {'ok', item_reply(item, tenant, id)}
