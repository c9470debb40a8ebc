-- Deletes processed marks of one shard that are still recorded at or before a cutoff.
-- KEYS: the shard's processed-ages index, then each mark's execution processed set
-- ARGV: cutoff, then (member, event id) per mark, in the order of KEYS[2..]
-- A mark whose score is gone or later (deleted and made again since it was read) is left.
-- Returns how many marks were deleted.
local cutoff = tonumber(ARGV[1])
local deleted = 0
for i = 2, #KEYS do
  local member, event_id = ARGV[2 * i - 2], ARGV[2 * i - 1]
  local score = redis.call('ZSCORE', KEYS[1], member)
  if score and tonumber(score) <= cutoff then
    redis.call('ZREM', KEYS[1], member)
    redis.call('SREM', KEYS[i], event_id)
    deleted = deleted + 1
  end
end
return deleted
