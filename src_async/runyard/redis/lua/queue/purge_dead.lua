-- Deletes up to `limit` of a tenant's dead letters with dead_at <= now - older_than, oldest
-- first. ARGV: tenant, now ('' server), older_than, limit. Returns how many.
-- KEYS: the queue's keys only. It builds the keys of the items it picks (from the dead letters)
--   from the namespace's hash tag, in the queue's slot (see the top of the prelude).
local tenant, now = ARGV[1], clock(ARGV[2])
local cutoff = tonumber(now) - tonumber(ARGV[3])
if cutoff < 0 then
  return 0
end
local prefix = seg(tenant)
local members = redis.call('ZRANGEBYLEX', DEAD, '[' .. prefix,
  '[' .. prefix .. time_key(cutoff) .. '\255', 'LIMIT', 0, tonumber(ARGV[4]))
for _, member in ipairs(members) do
  redis.call('ZREM', DEAD, member)
  local item = item_field(tenant, string.sub(member, #prefix + 17))
  chosen_item(item, tenant)
  forget(item, tenant)
end
return #members
