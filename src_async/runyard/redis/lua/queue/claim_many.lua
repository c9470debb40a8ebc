-- Claims up to `limit` items in the rotation that many single claims would follow, after
-- reclaiming up to a few lapsed leases and promoting due delayed items (as claim does).
-- KEYS: the queue's keys only. It builds the keys of the items it picks (as claim does) from the
--   namespace's hash tag, in the queue's slot (see the top of the prelude).
-- ARGV: worker, now ('' server), lease_seconds, promote batch, reclaim count, limit, retry
--       table from ARGV[7]
-- Returns the leased items' replies (none when nothing is due).
local worker, now = ARGV[1], clock(ARGV[2])
reclaim(now, tonumber(ARGV[5]), 7)
promote(now, tonumber(ARGV[4]))
local expires = plus(now, ARGV[3])
local out = {}
for _ = 1, tonumber(ARGV[6]) do
  local reply = claim_one(worker, now, expires)
  if not reply then
    break
  end
  out[#out + 1] = reply
end
return out
