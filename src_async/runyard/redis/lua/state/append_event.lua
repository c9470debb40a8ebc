-- Appends one event to a run's log with the next seq (gap-free: the list's length).
-- KEYS: run, lease, log, event ids
-- ARGV: rest, event_id ('' none), fence ('' none), now ('' server time), channel ('' none), publish command,
--       terminal statuses (NUL-joined): a run in one of them takes no more events
local run_key, lease_key, log_key, ids_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local prior = prior_event(ids_key, log_key, ARGV[2], ARGV[1])
if prior then
  return prior
end
if redis.call('EXISTS', run_key) == 0 then
  return {'not_found'}
end
local ended = terminal_status(run_key, ARGV[7])
if ended then
  return {'finalized', ended}
end
local now = clock(ARGV[4])
local fenced = fence_error(lease_key, ARGV[3], now)
if fenced then
  return fenced
end
local seq = push_event(log_key, ids_key, ARGV[2], ARGV[1], now, ARGV[5], ARGV[6])
return {'ok', seq, now}
