-- Drops the members of a session's run set whose run no longer names the session (deleted, or
-- moved to another session: still_in_session in the prelude, as
-- delete_session_runs does); Redis deletes the set with its last member.
-- KEYS: session-runs, then one run hash per member checked; ARGV: session id, run id...
-- Returns 1 when the set is gone afterwards, else 0.
for i = 2, #KEYS do
  still_in_session(KEYS[1], KEYS[i], ARGV[1], ARGV[i])
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 1
end
return 0
