-- Adds an item; an existing id or a live dedupe key returns the existing item instead. An item
-- that is ready at once pushes a hint to the wake key (idle workers block on it).
-- KEYS: the queue's keys, then the item's and its tenant's line (the item a dedupe key
--   names instead is picked inside, see the prelude).
-- ARGV: tenant, id, dedupe ('' none), payload, priority, now ('' server), delay seconds,
--       run_at ('' none), max_attempts ('' the policy's)
local status, item, tenant, id, ready = enqueue_one(ARGV[1], ARGV[2], ARGV[3], ARGV[4],
  ARGV[5], clock(ARGV[6]), ARGV[7], ARGV[8], ARGV[9])
if ready then
  wake(1)
end
return {status, item_reply(item, tenant, id)}
