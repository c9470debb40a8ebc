-- Reads a tenant's dead letters, oldest first. ARGV: tenant, limit
local tenant = ARGV[1]
local prefix = seg(tenant)
local members = redis.call('ZRANGEBYLEX', DEAD, '[' .. prefix, '(' .. prefix .. '\255',
  'LIMIT', 0, tonumber(ARGV[2]))
local out = {}
for _, member in ipairs(members) do
  local id = string.sub(member, #prefix + 17)
  out[#out + 1] = item_reply(item_field(tenant, id), tenant, id)
end
return out
