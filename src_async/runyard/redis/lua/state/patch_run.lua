-- Adds to a run's counters and bumps its version; needs no expected version.
-- KEYS: run, lease
-- ARGV: input_tokens, output_tokens, cost_micros, iterations, cursor, status ('' keeps),
--       fence ('' none), now ('' server time), write id (runyard.writes: kept as the run's
--       last write, read back when the reply is lost), channel ('' none), publish command
-- A terminal status written with a channel publishes a hint there (wakes followers).
local run_key, lease_key = KEYS[1], KEYS[2]
if redis.call('EXISTS', run_key) == 0 then
  return {'not_found'}
end
local now = clock(ARGV[8])
local fenced = fence_error(lease_key, ARGV[7], now)
if fenced then
  return fenced
end
local names = {'input_tokens', 'output_tokens', 'cost_micros', 'iterations', 'cursor'}
-- The whole patch or nothing: refuse before any write if a counter would pass 2**53 - 1
-- (runyard.validation.MAX_COUNTER), the largest integer a Lua number holds exactly.
local current = redis.call('HMGET', run_key, unpack(names))
for i, name in ipairs(names) do
  if tonumber(current[i] or '0') + tonumber(ARGV[i]) > 9007199254740991 then
    return {'out_of_range', name, current[i] or '0'}
  end
end
for i, name in ipairs(names) do
  if ARGV[i] ~= '0' then
    redis.call('HINCRBY', run_key, name, ARGV[i])
  end
end
redis.call('HINCRBY', run_key, 'version', 1)
redis.call('HSET', run_key, 'updated_at', now, 'write_id', ARGV[9])
if ARGV[6] ~= '' then
  redis.call('HSET', run_key, 'status', ARGV[6])
end
if ARGV[10] ~= '' then
  redis.call(ARGV[11], ARGV[10], 0)
end
local out = record(run_key)
out[#out + 1] = 'blob'
out[#out + 1] = redis.call('HGET', run_key, 'blob')
return out
