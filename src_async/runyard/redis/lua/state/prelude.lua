-- Shared by the state scripts. Time: ARGV carries the injected clock's reading, or '' to use
-- the server's clock (TIME), so the processes sharing a store agree on it whatever their own
-- clocks say (as in the queue's prelude). An injected reading is stored as given, so a value
-- read back is the exact float the caller computed. Scripts are replicated by effects
-- (Redis 7), so reading TIME in a writing script is allowed.
local function clock(arg)
  if arg ~= '' then
    return arg
  end
  local t = redis.call('TIME')
  return string.format('%.6f', tonumber(t[1]) + tonumber(t[2]) / 1000000)
end

-- A time plus seconds, as exact text (%.17g round-trips a double, as Python's repr does).
local function plus(moment, seconds)
  return string.format('%.17g', tonumber(moment) + tonumber(seconds))
end

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

-- Shared by delete_session_runs and prune_session_runs: a member of a session's run set
-- (members_key) whose run no longer names the session (deleted, or moved to another session)
-- leaves the set. Returns true when the run still names the session (it stays).
local function still_in_session(members_key, run_key, session, run_id)
  if redis.call('HGET', run_key, 'session') == session then
    return true
  end
  redis.call('SREM', members_key, run_id)
  return false
end

-- Before a run or session is deleted: keep its last write id for ttl seconds at tomb_key (its
-- tombstone, runyard.writes), so a write whose reply was lost is not sent again after it.
local function bury(record_key, tomb_key, ttl)
  local write_id = redis.call('HGET', record_key, 'write_id')
  if write_id then
    redis.call('SET', tomb_key, write_id, 'EX', ttl)
  end
end
