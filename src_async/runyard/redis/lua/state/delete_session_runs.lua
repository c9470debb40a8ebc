-- One bounded batch of delete_session: checks the runs the caller read from the session's run
-- set. A run that no longer names the session leaves the set; one that does is counted, and
-- with cascade deleted with its event log (leaving the set and the listing index too).
-- KEYS: session-runs, runs index, then per run: run, event log, event ids
-- ARGV: cascade ('1'/'0'), session id, run id...
-- Returns the number of runs that still named the session.
local members_key, index_key = KEYS[1], KEYS[2]
local live = 0
for i = 3, #ARGV do
  local run_id = ARGV[i]
  local run_key = KEYS[3 * (i - 3) + 3]
  if redis.call('HGET', run_key, 'session') == ARGV[2] then
    live = live + 1
    if ARGV[1] == '1' then
      redis.call('DEL', run_key, KEYS[3 * (i - 3) + 4], KEYS[3 * (i - 3) + 5])
      redis.call('ZREM', index_key, run_id)
      redis.call('SREM', members_key, run_id)
    end
  else
    redis.call('SREM', members_key, run_id)
  end
end
return live
