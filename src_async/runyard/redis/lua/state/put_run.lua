-- Compare-and-swap write of a run's blob; version 0 creates it with the tenant's next seq.
-- KEYS: run, runs index, seq counter, lease [, session-runs]
-- ARGV: expected_version, blob, status ('' keeps), session ('' keeps), fence ('' none),
--       now ('' server time),
--       default status, run id, write id (runyard.writes), channel ('' none), publish command
-- The run keeps the id of its last write: this write sent again after it landed (its reply
-- was lost) finds its own id at the next version and returns the run instead of a conflict.
-- A terminal status written with a channel publishes a hint there (wakes followers).
local run_key, index_key, seq_key, lease_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local actual = tonumber(redis.call('HGET', run_key, 'version') or '0')
if tonumber(ARGV[1]) ~= actual then
  if actual == tonumber(ARGV[1]) + 1 and redis.call('HGET', run_key, 'write_id') == ARGV[9] then
    return record(run_key)
  end
  return {'conflict', actual}
end
local now = clock(ARGV[6])
local fenced = fence_error(lease_key, ARGV[5], now)
if fenced then
  return fenced
end
if actual == 0 then
  local seq = redis.call('INCR', seq_key)
  local status = ARGV[3]
  if status == '' then
    status = ARGV[7]
  end
  redis.call('HSET', run_key, 'blob', ARGV[2], 'version', 1, 'status', status,
    'input_tokens', 0, 'output_tokens', 0, 'cost_micros', 0, 'iterations', 0, 'cursor', 0,
    'created_at', now, 'updated_at', now, 'seq', seq, 'write_id', ARGV[9])
  redis.call('ZADD', index_key, seq, ARGV[8])
else
  redis.call('HSET', run_key, 'blob', ARGV[2], 'updated_at', now, 'write_id', ARGV[9])
  redis.call('HINCRBY', run_key, 'version', 1)
  if ARGV[3] ~= '' then
    redis.call('HSET', run_key, 'status', ARGV[3])
  end
end
if ARGV[4] ~= '' then
  redis.call('HSET', run_key, 'session', ARGV[4])
  redis.call('SADD', KEYS[5], ARGV[8])
end
if ARGV[10] ~= '' then
  redis.call(ARGV[11], ARGV[10], 0)
end
return record(run_key)
