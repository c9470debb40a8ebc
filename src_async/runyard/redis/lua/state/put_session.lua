-- Compare-and-swap write of a session's blob.
-- KEYS: session ; ARGV: expected_version, blob, now ('' server time)
-- Returns {'ok', version, created_at, updated_at}.
local key = KEYS[1]
local actual = tonumber(redis.call('HGET', key, 'version') or '0')
if tonumber(ARGV[1]) ~= actual then
  return {'conflict', actual}
end
local now = clock(ARGV[3])
redis.call('HSETNX', key, 'created_at', now)
redis.call('HSET', key, 'blob', ARGV[2], 'updated_at', now)
local version = redis.call('HINCRBY', key, 'version', 1)
return {'ok', version, redis.call('HGET', key, 'created_at'), now}
