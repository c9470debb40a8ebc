-- The last step of delete_session: deletes the session once every run that named it has been
-- dealt with by delete_session_runs (its run set is then empty).
-- KEYS: session, session-runs, tombstone; ARGV: '1' when the batches deleted runs, else '0',
--   tombstone TTL (seconds)
-- A run written with the session since the batches read the set is in the set again: the
-- caller runs the batches once more.
if redis.call('SCARD', KEYS[2]) > 0 then
  return {'changed'}
end
bury(KEYS[1], KEYS[3], ARGV[2])
local existed = redis.call('DEL', KEYS[1])
if existed > 0 or ARGV[1] == '1' then
  return {'ok', 1}
end
return {'ok', 0}
