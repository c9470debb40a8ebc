-- Reads a run's lease: {epoch, holder, expires_at} while it is live at now, else {}.
-- KEYS: lease ; ARGV: now ('' server time)
local lease = redis.call('HMGET', KEYS[1], 'epoch', 'holder', 'expires_at')
if not lease[2] or tonumber(lease[3]) < tonumber(clock(ARGV[1])) then
  return {}
end
return lease
