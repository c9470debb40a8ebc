-- Deletes a run and its event log (optionally only at an expected version, fenced); its
-- epoch survives, and its last write id for a while (its tombstone).
-- KEYS: run, runs index, lease, event log, event ids, tombstone
-- ARGV: expected_version ('' any), fence ('' none), now ('' server time), run id,
--   tombstone TTL (seconds)
local run_key, index_key, lease_key = KEYS[1], KEYS[2], KEYS[3]
local version = redis.call('HGET', run_key, 'version')
if not version then
  if ARGV[1] ~= '' and tonumber(ARGV[1]) ~= 0 then
    return {'conflict', 0}
  end
  return {'ok', 0}
end
if ARGV[1] ~= '' and tonumber(ARGV[1]) ~= tonumber(version) then
  return {'conflict', tonumber(version)}
end
local fenced = ARGV[2] ~= '' and fence_error(lease_key, ARGV[2], clock(ARGV[3]))
if fenced then
  return fenced
end
bury(run_key, KEYS[6], ARGV[5])
redis.call('DEL', run_key, KEYS[4], KEYS[5])
redis.call('ZREM', index_key, ARGV[4])
return {'ok', 1}
