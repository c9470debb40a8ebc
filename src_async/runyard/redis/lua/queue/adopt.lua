-- Extends and returns the live, uncapped leases a worker holds, in token order.
-- ARGV: worker, now, renew_to (now + lease_seconds), max_lease_seconds, limit
-- Reads the worker's index `limit` entries at a time; a lapsed or capped lease (left in the
-- index until reap takes it) is stepped over, so a page after it is read only if needed.
local worker, now, max_lease = ARGV[1], ARGV[2], ARGV[4]
local limit = tonumber(ARGV[5])
local prefix = seg(worker)
local out = {}
local offset = 0
while #out < limit do
  local held = redis.call('ZRANGEBYLEX', WORKERS, '[' .. prefix, '(' .. prefix .. '\255',
    'LIMIT', offset, limit)
  for _, member in ipairs(held) do
    if #out >= limit then
      break
    end
    local token = string.sub(member, #prefix + 1, #prefix + 16)
    local item = string.sub(member, #prefix + 17)
    local tenant, id = split_item(item)
    if not lease_error(item, id, tostring(tonumber(token)), now, max_lease) then
      local expires = renewed_expiry(item, ARGV[3], max_lease)
      set(item, 'expires', expires)
      redis.call('ZADD', LEASES, expires, token .. item)
      out[#out + 1] = item_reply(item, tenant, id)
    end
  end
  if #held < limit then
    break
  end
  offset = offset + #held
end
return out
