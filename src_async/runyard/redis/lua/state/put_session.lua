-- Compare-and-swap write of a session's blob.
-- KEYS: session ; ARGV: expected_version, blob, now
local key = KEYS[1]
local actual = tonumber(redis.call('HGET', key, 'version') or '0')
if tonumber(ARGV[1]) ~= actual then
  return {'conflict', actual}
end
redis.call('HSETNX', key, 'created_at', ARGV[3])
redis.call('HSET', key, 'blob', ARGV[2], 'updated_at', ARGV[3])
local version = redis.call('HINCRBY', key, 'version', 1)
return {'ok', version, redis.call('HGET', key, 'created_at')}
