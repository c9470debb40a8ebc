-- Reads a tenant's dead letters, oldest first. ARGV: tenant, limit
-- KEYS: the queue's keys only. It builds the keys of the items it picks (from the dead letters)
--   from the namespace's hash tag, in the queue's slot (see the top of the prelude).
local tenant = ARGV[1]
local prefix = seg(tenant)
local members = redis.call('ZRANGEBYLEX', DEAD, '[' .. prefix, '(' .. prefix .. '\255',
  'LIMIT', 0, tonumber(ARGV[2]))
local out = {}
for _, member in ipairs(members) do
  local id = string.sub(member, #prefix + 17)
  local item = item_field(tenant, id)
  chosen_item(item, tenant)
  out[#out + 1] = item_reply(item, tenant, id)
end
return out
