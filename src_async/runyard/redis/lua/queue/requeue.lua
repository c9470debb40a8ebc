-- Moves a dead-lettered item back to ready with its attempts reset.
-- ARGV: tenant, id, now ('' server)
local tenant, id, now = ARGV[1], ARGV[2], clock(ARGV[3])
local item = item_field(tenant, id)
if get(item, 'state') ~= 'dead' then
  return {'not_found'}
end
redis.call('ZREM', DEAD, seg(tenant) .. get(item, 'dead_key') .. id)
clear(item, 'dead_reason', 'dead_at', 'dead_key')
set(item, 'state', 'ready', 'attempts', 0, 'available', now)
make_ready(item, tenant, id, now, now)
return {'ok', item_reply(item, tenant, id)}
