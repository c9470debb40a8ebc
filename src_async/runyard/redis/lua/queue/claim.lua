-- Claims the next item in ONE step: reclaims up to a few lapsed leases (as reap does), promotes
-- due delayed items, then leases the head of the tenant whose turn it is (claim_one).
-- KEYS: the queue's keys only. It builds the keys of the items it picks (lapsed leases, due
--   delayed items, the head of the tenant whose turn it is) from the namespace's hash tag, in the
--   queue's slot (see the top of the prelude).
-- ARGV: worker, now ('' server), lease_seconds, promote batch, reclaim count, retry table
--       from ARGV[6] (see attempt_limit() in the prelude)
local worker, now = ARGV[1], clock(ARGV[2])
reclaim(now, tonumber(ARGV[5]), 6)
promote(now, tonumber(ARGV[4]))
local reply = claim_one(worker, now, plus(now, ARGV[3]))
if not reply then
  return {'empty'}
end
return {'ok', reply}
