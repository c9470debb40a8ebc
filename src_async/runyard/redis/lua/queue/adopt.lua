-- Extends and returns the live, uncapped leases a worker holds, in token order, reading at
-- most `scan` index entries after `after` (the last entry a previous call read; '' for the
-- start). A lapsed or capped lease (left in the index until reap takes it) is stepped over.
-- ARGV: worker, now ('' server), lease_seconds, max_lease_seconds, limit, after, scan
-- Returns {leases, the last entry read ('' when the worker's index is exhausted)}.
local worker, now, max_lease = ARGV[1], clock(ARGV[2]), ARGV[4]
local limit, after, scan = tonumber(ARGV[5]), ARGV[6], tonumber(ARGV[7])
local prefix = seg(worker)
local renew_to = plus(now, ARGV[3])
local out = {}
local low = '[' .. prefix
if after ~= '' then
  low = '(' .. after
end
local read = 0
while #out < limit and read < scan do
  local held = redis.call('ZRANGEBYLEX', WORKERS, low, '(' .. prefix .. '\255',
    'LIMIT', 0, math.min(limit - #out, scan - read))
  if #held == 0 then
    return {out, ''}
  end
  for _, member in ipairs(held) do
    local token = string.sub(member, #prefix + 1, #prefix + 16)
    local item = string.sub(member, #prefix + 17)
    local tenant, id = split_item(item)
    if not lease_error(item, id, tostring(tonumber(token)), now, max_lease) then
      local expires = renewed_expiry(item, renew_to, max_lease)
      set(item, 'expires', expires)
      redis.call('ZADD', LEASES, expires, token .. item)
      out[#out + 1] = item_reply(item, tenant, id)
    end
  end
  read = read + #held
  low = '(' .. held[#held]
end
return {out, string.sub(low, 2)}
