-- Reads one item (ready, delayed, leased or dead). ARGV: tenant, id
-- Returns its reply, or false when it does not exist.
-- KEYS: the queue's keys, then the item's.
local tenant, id = ARGV[1], ARGV[2]
local item = item_field(tenant, id)
if not exists(item) then
  return false
end
return item_reply(item, tenant, id)
