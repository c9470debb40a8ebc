-- Deletes a session, refusing (or, with cascade, deleting) the runs that still name it.
-- KEYS: session, session-runs, runs index, run... (one per member the caller read)
-- ARGV: cascade ('1' or '0'), session id, run id... (same order as the run keys)
local session_key, members_key, index_key = KEYS[1], KEYS[2], KEYS[3]
local count = #KEYS - 3
-- Members are only ever added elsewhere, so an unchanged count means an unchanged set.
if redis.call('SCARD', members_key) ~= count then
  return {'changed'}
end
local live = {}
for i = 1, count do
  if redis.call('HGET', KEYS[3 + i], 'session') == ARGV[2] then
    live[#live + 1] = i
  end
end
if #live > 0 and ARGV[1] ~= '1' then
  return {'in_use', #live}
end
for _, i in ipairs(live) do
  redis.call('DEL', KEYS[3 + i])
  redis.call('ZREM', index_key, ARGV[2 + i])
end
local existed = redis.call('DEL', session_key)
redis.call('DEL', members_key)
if existed > 0 or #live > 0 then
  return {'ok', 1}
end
return {'ok', 0}
