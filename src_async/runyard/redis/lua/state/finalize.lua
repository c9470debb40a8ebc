-- Sets a terminal status and appends the terminal event, or changes nothing.
-- KEYS: run, lease, log, event ids
-- ARGV: rest, event_id ('' none), fence ('' none), now ('' server time), channel ('' none), publish command,
--       status, expected_version ('' none), terminal statuses (NUL-joined): a run
--       already in one of them is refused, unless this is the retry of its event_id;
--       write id (runyard.writes: kept as the run's last write)
local run_key, lease_key, log_key, ids_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local prior = prior_event(ids_key, log_key, ARGV[2], ARGV[1])
if prior and prior[1] == 'event_conflict' then
  return prior
end
local actual = tonumber(redis.call('HGET', run_key, 'version') or '0')
if actual == 0 then
  return {'not_found'}
end
if not prior then
  local ended = terminal_status(run_key, ARGV[9])
  if ended then
    return {'finalized', ended}
  end
  if ARGV[8] ~= '' and tonumber(ARGV[8]) ~= actual then
    return {'conflict', actual}
  end
  local now = clock(ARGV[4])
  local fenced = fence_error(lease_key, ARGV[3], now)
  if fenced then
    return fenced
  end
  redis.call('HINCRBY', run_key, 'version', 1)
  redis.call('HSET', run_key, 'status', ARGV[7], 'updated_at', now, 'write_id', ARGV[10])
  push_event(log_key, ids_key, ARGV[2], ARGV[1], now, ARGV[5], ARGV[6])
end
local out = record(run_key)
out[#out + 1] = 'blob'
out[#out + 1] = redis.call('HGET', run_key, 'blob')
return out
