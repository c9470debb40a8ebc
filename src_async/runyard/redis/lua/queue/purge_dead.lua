-- Deletes up to `limit` of a tenant's dead letters with dead_at <= now - older_than, oldest
-- first. ARGV: tenant, now ('' server), older_than, limit. Returns how many.
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
  forget(item_field(tenant, string.sub(member, #prefix + 17)), tenant)
end
return #members
