-- Claims the next item in ONE step: reclaims up to a few lapsed leases (as reap does), promotes
-- due delayed items, then leases the head of the tenant whose turn it is (claim_one).
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
