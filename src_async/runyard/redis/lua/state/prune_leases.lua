-- Deletes the leases of one tenant that are not live (released, or lapsed before now) and
-- raises the tenant's lease floor to the highest epoch deleted, so the next lease of such a run
-- gets a higher epoch (acquire_lease reads the floor).
-- KEYS: the tenant's lease floor, then lease hashes of that tenant; ARGV: now ('' server time)
-- Returns how many leases were deleted.
local now = tonumber(clock(ARGV[1]))
local floor = tonumber(redis.call('GET', KEYS[1]) or '0')
local deleted = 0
for i = 2, #KEYS do
  local lease = redis.call('HMGET', KEYS[i], 'epoch', 'holder', 'expires_at')
  if lease[1] and (not lease[2] or tonumber(lease[3]) < now) then
    floor = math.max(floor, tonumber(lease[1]))
    redis.call('DEL', KEYS[i])
    deleted = deleted + 1
  end
end
if deleted > 0 then
  redis.call('SET', KEYS[1], string.format('%d', floor))
end
return deleted
