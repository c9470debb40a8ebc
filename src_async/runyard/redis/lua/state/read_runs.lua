-- Reads a batch of runs for a listing, keeping only those that match the filters; a run that
-- does not match is checked on its status and session fields alone (its blob is never read).
-- KEYS: run... ; ARGV: status ('' any), session ('' any)
-- Returns one entry per key: the run's fields as a flat list, or an empty list.
local out = {}
for i, run_key in ipairs(KEYS) do
  local keep = true
  if ARGV[1] ~= '' or ARGV[2] ~= '' then
    local filters = redis.call('HMGET', run_key, 'status', 'session')
    if ARGV[1] ~= '' and filters[1] ~= ARGV[1] then
      keep = false
    end
    if ARGV[2] ~= '' and filters[2] ~= ARGV[2] then
      keep = false
    end
  end
  if keep then
    out[i] = redis.call('HGETALL', run_key)
  else
    out[i] = {}
  end
end
return out
