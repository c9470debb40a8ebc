-- Completes (or releases: back to ready at once, the attempt not counted) every item, each
-- fenced on its own token; released items push wake hints.
-- KEYS: the queue's keys, then every item's, then (release) each of their tenants' lines.
-- ARGV: 'complete' or 'release', now ('' server), max_lease_seconds, then tenant, id, token
--       per item
-- Returns per item {'ok'} or its refusal ({'not_found'}, {'lease_lost', reason}).
local release, now, max_lease = ARGV[1] == 'release', clock(ARGV[2]), ARGV[3]
local out, released = {}, 0
for at = 4, #ARGV, 3 do
  local reply
  if release then
    reply = release_one(ARGV[at], ARGV[at + 1], ARGV[at + 2], now, max_lease)
    if reply[1] == 'ok' then
      released = released + 1
    end
  else
    reply = complete_one(ARGV[at], ARGV[at + 1], ARGV[at + 2], now, max_lease)
  end
  out[#out + 1] = reply
end
wake(released)
return out
