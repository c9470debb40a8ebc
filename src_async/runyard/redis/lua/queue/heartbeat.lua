-- Extends a lease, fenced on its token, never past the lease cap.
-- ARGV: tenant, id, token, now ('' server), lease_seconds, max_lease_seconds
local tenant, id, token, now = ARGV[1], ARGV[2], ARGV[3], clock(ARGV[4])
local item = item_field(tenant, id)
local lost = lease_error(item, id, token, now, ARGV[6])
if lost then
  return lost
end
local expires = renewed_expiry(item, plus(now, ARGV[5]), ARGV[6])
set(item, 'expires', expires)
redis.call('ZADD', LEASES, expires, num16(tonumber(token)) .. item)
return {'ok', item_reply(item, tenant, id)}
