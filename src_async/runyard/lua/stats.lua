-- Counts items by state; due items not yet promoted count as ready. ARGV: now
local now = ARGV[1]
local due = redis.call('ZRANGEBYSCORE', DELAYED, '-inf', now)
local tenants = redis.call('ZCARD', ROTATION)
local seen = {}
for _, member in ipairs(due) do
  local tenant = split_item(string.sub(member, 17))
  if not seen[tenant] and not redis.call('ZSCORE', ROTATION, tenant) then
    seen[tenant] = true
    tenants = tenants + 1
  end
end
return {
  redis.call('ZCARD', READY) + #due,
  redis.call('ZCOUNT', DELAYED, '(' .. now, '+inf'),
  redis.call('ZCARD', LEASES),
  redis.call('ZCARD', DEAD),
  tenants,
}
