-- Records a failed attempt, fenced on its token (mirrors QueuePolicy.on_failure with the
-- item's own max attempts): retried after the policy's backoff, or dead.
-- KEYS: the queue's keys, then the item's and its tenant's line.
-- ARGV: tenant, id, token, now ('' server), max_lease_seconds, has_error ('1'/'0'), error,
--       retryable ('1'/'0'), retry table from ARGV[9]
local tenant, id, token, now = ARGV[1], ARGV[2], ARGV[3], clock(ARGV[4])
local item = item_field(tenant, id)
local lost = lease_error(item, token, now, ARGV[5])
if lost then
  return lost
end
local error_text = false
if ARGV[6] == '1' then
  error_text = ARGV[7]
end
local attempts, limit = attempts_of(item), attempt_limit(item, 9)
if ARGV[8] ~= '1' then
  kill(item, tenant, id, 'failed (not retryable)', error_text, now)
elseif attempts >= limit then
  kill(item, tenant, id, 'failed ' .. attempts .. ' of ' .. limit .. ' attempts', error_text, now)
elseif retry(item, tenant, id, retry_at(9, attempts, now), error_text, now) then
  wake(1)
end
return {'ok', item_reply(item, tenant, id)}
