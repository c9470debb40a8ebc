-- Shared by the state scripts. Times arrive as text from the caller's injected clock and are
-- stored as given, so a value read back is the exact float the caller computed.

-- Mirrors MemoryStateCore._check_fence: a stale epoch is "taken", a lapsed lease "expired".
local function fence_error(lease_key, fence, now)
  if fence == '' then
    return nil
  end
  local lease = redis.call('HMGET', lease_key, 'epoch', 'holder', 'expires_at')
  if tonumber(lease[1] or '0') ~= tonumber(fence) then
    return {'lease_lost', 'taken'}
  end
  if not lease[2] or tonumber(lease[3]) < tonumber(now) then
    return {'lease_lost', 'expired'}
  end
  return nil
end

local RECORD_FIELDS = {'version', 'status', 'session', 'input_tokens', 'output_tokens',
  'cost_micros', 'iterations', 'cursor', 'created_at', 'updated_at', 'seq'}

-- The run's fields (without the blob) as a flat name/value list.
local function record(run_key)
  local values = redis.call('HMGET', run_key, unpack(RECORD_FIELDS))
  local out = {'ok'}
  for i, name in ipairs(RECORD_FIELDS) do
    out[#out + 1] = name
    out[#out + 1] = values[i]
  end
  return out
end
