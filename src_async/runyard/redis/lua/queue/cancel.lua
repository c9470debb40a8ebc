-- Deletes a ready, delayed or dead item (its dedupe key freed), as if completed.
-- KEYS: the queue's keys, then the item's and its tenant's line.
-- ARGV: tenant, id
-- Returns {'ok'}, {'missing'} (unknown or completed) or {'leased', worker} (nothing changed).
local tenant, id = ARGV[1], ARGV[2]
local item = item_field(tenant, id)
if not exists(item) then
  return {'missing'}
end
local v = redis.call('HMGET', ikey(item), 's', 'w', 'dt')
if v[1] == 'l' then
  return {'leased', v[2]}
end
if v[1] == 'd' then
  redis.call('ZREM', DEAD, seg(tenant) .. time_key(v[3]) .. id)
else
  leave_line(item, tenant, id)
end
forget(item, tenant)
return {'ok'}
