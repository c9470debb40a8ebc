-- Extends the live, uncapped leases a worker holds, in token order, each with a FRESH token
-- (the old one is refused from then on), reading at most `scan` index entries after `after`
-- (the last entry a previous call read; '' for the start). A lapsed or capped lease (left in
-- the index until reap takes it) is stepped over. Only entries with a token up to `ceiling`
-- (the token counter when the first call ran) are read, so re-minted entries are not met
-- again.
-- KEYS: the queue's keys only. It builds the keys of the items it picks (from the worker's lease
--   index) from the namespace's hash tag, in the queue's slot (see the top of the prelude).
-- ARGV: worker, now ('' server), lease_seconds, max_lease_seconds, limit, after, scan,
--       ceiling ('' on the first call)
-- Returns {leases, the last entry read ('' when the worker's index is exhausted), ceiling}.
local worker, now, max_lease = ARGV[1], clock(ARGV[2]), ARGV[4]
local limit, after, scan, ceiling = tonumber(ARGV[5]), ARGV[6], tonumber(ARGV[7]), ARGV[8]
if ceiling == '' then
  ceiling = num16(tonumber(redis.call('HGET', COUNTERS, 'token') or 0))
end
local prefix = seg(worker)
local renew_to = plus(now, ARGV[3])
local out = {}
local low = '[' .. prefix
if after ~= '' then
  low = '(' .. after
end
local high = '[' .. prefix .. ceiling .. '\255'
local read = 0
while #out < limit and read < scan do
  local held = redis.call('ZRANGEBYLEX', WORKERS, low, high,
    'LIMIT', 0, math.min(limit - #out, scan - read))
  if #held == 0 then
    return {out, '', ceiling}
  end
  for _, member in ipairs(held) do
    local token = string.sub(member, #prefix + 1, #prefix + 16)
    local item = string.sub(member, #prefix + 17)
    local tenant, id = split_item(item)
    chosen_item(item, tenant)
    if not lease_error(item, tostring(tonumber(token)), now, max_lease) then
      local expires = renewed_expiry(item, renew_to, max_lease)
      local fresh = redis.call('HINCRBY', COUNTERS, 'token', 1)
      redis.call('ZREM', LEASES, token .. item)
      redis.call('ZREM', WORKERS, member)
      set(item, 'x', expires, 't', fresh)
      redis.call('ZADD', LEASES, expires, num16(fresh) .. item)
      redis.call('ZADD', WORKERS, 0, prefix .. num16(fresh) .. item)
      out[#out + 1] = item_reply(item, tenant, id)
    end
  end
  read = read + #held
  low = '(' .. held[#held]
end
return {out, string.sub(low, 2), ceiling}
