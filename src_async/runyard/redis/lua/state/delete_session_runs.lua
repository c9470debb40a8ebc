-- One bounded batch of delete_session: checks the runs the caller read from the session's run
-- set. A run that no longer names the session leaves the set; one that does is counted, and
-- with cascade deleted with its event log (leaving the set and the listing index too).
-- KEYS: session-runs, runs index, then per run: run, event log, event ids, tombstone
-- ARGV: cascade ('1'/'0'), session id, tombstone TTL (seconds), run id...
-- Returns the number of runs that still named the session.
local members_key, index_key = KEYS[1], KEYS[2]
local live = 0
for i = 4, #ARGV do
  local run_id, at = ARGV[i], 4 * (i - 4) + 3
  if still_in_session(members_key, KEYS[at], ARGV[2], run_id) then
    live = live + 1
    if ARGV[1] == '1' then
      bury(KEYS[at], KEYS[at + 3], ARGV[3])
      redis.call('DEL', KEYS[at], KEYS[at + 1], KEYS[at + 2])
      redis.call('ZREM', index_key, run_id)
      redis.call('SREM', members_key, run_id)
    end
  end
end
return live
