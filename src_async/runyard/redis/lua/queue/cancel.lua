-- Deletes a ready, delayed or dead item (its dedupe key freed), as if completed.
-- ARGV: tenant, id
-- Returns {'ok'}, {'missing'} (unknown or completed) or {'leased', worker} (nothing changed).
local tenant, id = ARGV[1], ARGV[2]
local item = item_field(tenant, id)
local v = redis.call('HMGET', ikey(item), 'e', 's', 'w', 'dt')
if not v[1] then
  return {'missing'}
end
if v[2] == 'l' then
  return {'leased', v[3]}
end
if v[2] == 'd' then
  redis.call('ZREM', DEAD, seg(tenant) .. time_key(v[4]) .. id)
else
  leave_line(item, tenant, id)
end
forget(item, tenant)
return {'ok'}
