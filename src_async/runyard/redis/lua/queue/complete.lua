-- Finishes an item, fenced on its token: the item is deleted and frees its dedupe key.
-- ARGV: tenant, id, token, now ('' server), max_lease_seconds
local tenant, id, token = ARGV[1], ARGV[2], ARGV[3]
local item = item_field(tenant, id)
local lost = lease_error(item, id, token, clock(ARGV[4]), ARGV[5])
if lost then
  return lost
end
unlease(item)
local dedupe = get(item, 'dedupe')
if dedupe then
  redis.call('HDEL', DEDUPE, seg(tenant) .. seg(dedupe))
end
redis.call('DEL', ikey(item))
return {'ok'}
