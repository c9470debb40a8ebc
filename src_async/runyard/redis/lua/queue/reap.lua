-- Returns lapsed leases (now > expires_at) to ready or the dead letter, oldest expiry first,
-- at most `limit` per call.
-- ARGV: now ('' server), limit, decision table (see decision() in the prelude)
local now = clock(ARGV[1])
local lapsed = redis.call('ZRANGEBYSCORE', LEASES, '-inf', '(' .. now, 'LIMIT', 0,
  tonumber(ARGV[2]))
local out = {}
for _, member in ipairs(lapsed) do
  local item = string.sub(member, 17)
  local tenant, id = split_item(item)
  local outcome, at, reason = decision(3, tonumber(get(item, 'attempts')), now)
  if outcome == 'dead' then
    kill(item, tenant, id, reason, 'lease lapsed', now)
  else
    retry(item, tenant, id, at, 'lease lapsed', now)
  end
  out[#out + 1] = item_reply(item, tenant, id)
end
return out
