-- Shared by the event scripts. A log entry is "<at>\n<rest>", where rest is
-- "<terminal flag>\n<json [type, event_id]>\n<json data>": everything but the time, so a retry
-- with the same event_id is recognised by comparing rest.

-- The event an event_id already names: nil, {'same', seq, at}, or {'event_conflict', seq}.
local function prior_event(ids_key, log_key, event_id, rest)
  if event_id == '' then
    return nil
  end
  local seq = redis.call('HGET', ids_key, event_id)
  if not seq then
    return nil
  end
  local stored = redis.call('LINDEX', log_key, tonumber(seq) - 1)
  local nl = string.find(stored, '\n', 1, true)
  if string.sub(stored, nl + 1) ~= rest then
    return {'event_conflict', seq}
  end
  return {'same', seq, string.sub(stored, 1, nl - 1)}
end

-- Appends the entry, remembers its event_id, and publishes the hint; returns the seq.
local function push_event(log_key, ids_key, event_id, rest, now, channel, command)
  local seq = redis.call('RPUSH', log_key, now .. '\n' .. rest)
  if event_id ~= '' then
    redis.call('HSET', ids_key, event_id, seq)
  end
  if channel ~= '' then
    redis.call(command, channel, seq)
  end
  return seq
end

-- The run's status when it is one of the terminal statuses (NUL-joined: a status has no
-- NUL), else nil.
local function terminal_status(run_key, terminal_statuses)
  local status = redis.call('HGET', run_key, 'status')
  if status and string.find('\0' .. terminal_statuses .. '\0', '\0' .. status .. '\0', 1, true) then
    return status
  end
  return nil
end
