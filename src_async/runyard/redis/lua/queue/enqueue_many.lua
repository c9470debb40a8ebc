-- Adds every item in order, as enqueue does one by one (dedupe included), and pushes one wake
-- hint per item ready at once (at most the wake key's bound).
-- KEYS: the queue's keys, then every item's, then the tenant's line (an item a dedupe key
--   names instead is picked inside, see the prelude).
-- ARGV: tenant, now ('' server), then per item: id, dedupe ('' none), payload, priority,
--       delay seconds, run_at ('' none), max_attempts ('' the policy's)
-- Returns one item reply per item.
local tenant, now = ARGV[1], clock(ARGV[2])
local out, ready_count = {}, 0
for at = 3, #ARGV, 7 do
  local _, item, t, id, ready = enqueue_one(tenant, ARGV[at], ARGV[at + 1], ARGV[at + 2],
    ARGV[at + 3], now, ARGV[at + 4], ARGV[at + 5], ARGV[at + 6])
  if ready then
    ready_count = ready_count + 1
  end
  out[#out + 1] = item_reply(item, t, id)
end
wake(ready_count)
return out
