-- Records a failed attempt, fenced on its token: retried at the policy's time, or dead.
-- ARGV: tenant, id, token, now ('' server), max_lease_seconds, has_error ('1'/'0'), error,
--       decision table (see decision() in the prelude)
local tenant, id, token, now = ARGV[1], ARGV[2], ARGV[3], clock(ARGV[4])
local item = item_field(tenant, id)
local lost = lease_error(item, id, token, now, ARGV[5])
if lost then
  return lost
end
local error_text = false
if ARGV[6] == '1' then
  error_text = ARGV[7]
end
local outcome, at, reason = decision(8, tonumber(get(item, 'attempts')), now)
if outcome == 'dead' then
  kill(item, tenant, id, reason, error_text, now)
else
  retry(item, tenant, id, at, error_text, now)
end
return {'ok', item_reply(item, tenant, id)}
