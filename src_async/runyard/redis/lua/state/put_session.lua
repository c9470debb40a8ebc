-- Compare-and-swap write of a session's blob.
-- KEYS: session ; ARGV: expected_version, blob, now ('' server time), write id (runyard.writes)
-- Returns {'ok', version, created_at, updated_at}. The session keeps the id of its last
-- write: this write sent again after it landed finds its own id at the next version and
-- returns the session instead of a conflict.
local key = KEYS[1]
local actual = tonumber(redis.call('HGET', key, 'version') or '0')
if tonumber(ARGV[1]) ~= actual then
  if actual == tonumber(ARGV[1]) + 1 and redis.call('HGET', key, 'write_id') == ARGV[4] then
    local stored = redis.call('HMGET', key, 'created_at', 'updated_at')
    return {'ok', actual, stored[1], stored[2]}
  end
  return {'conflict', actual}
end
local now = clock(ARGV[3])
redis.call('HSETNX', key, 'created_at', now)
redis.call('HSET', key, 'blob', ARGV[2], 'updated_at', now, 'write_id', ARGV[4])
local version = redis.call('HINCRBY', key, 'version', 1)
return {'ok', version, redis.call('HGET', key, 'created_at'), now}
