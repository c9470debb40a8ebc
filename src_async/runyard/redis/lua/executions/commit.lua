-- The full path: seq allocation, compare-and-swap and every write of one commit.
-- KEYS[1..4] as in the prelude, then the shard's outbox, spawns and timers, and the
-- execution's trace list and trace index, and the shard's processed-ages index.
-- ARGV[1..10] as in the prelude, then shards, this shard, trace_max, the trace step JSON
-- ('' none), the number of emits, timer ops and spawns; then each emit's JSON, each timer op
-- as (action, member, fire_at), each spawn's JSON. Returns the outbox seqs.
local found = found_version(KEYS[1])
if found ~= tonumber(ARGV[1]) then
  return conflict(found)
end
local shards, shard = tonumber(ARGV[11]), tonumber(ARGV[12])
local n_emits, n_timers, n_spawns = tonumber(ARGV[15]), tonumber(ARGV[16]), tonumber(ARGV[17])
local at = 18

-- A seq is n * shards + shard: it encodes its shard (seq % shards), so an ack finds the
-- entry's shard without a lookup. n is time-ordered, so the shards' entries merge oldest first:
-- the server's clock in milliseconds (an injected clock's when one is given), or one more than
-- the shard's last n when that is larger (n never repeats or goes back).
-- n stays below 2^53 / shards (exact in a double) until the year 2248 for shards <= 1024.
local now = clock(ARGV[2])
local now_ms = math.floor(tonumber(now) * 1000)
local function next_seq(counter)
  local n = tonumber(redis.call('HGET', KEYS[3], counter) or '0') + 1
  if now_ms > n then
    n = now_ms
  end
  redis.call('HSET', KEYS[3], counter, string.format('%d', n))
  return string.format('%d', n * shards + shard)
end

local seqs = {}
for i = 1, n_emits do
  local seq = next_seq('outbox')
  redis.call('ZADD', KEYS[5], seq, seq .. ' ' .. ARGV[at])
  seqs[i] = seq
  at = at + 1
end
for _ = 1, n_timers do
  local action, member, fire_at = ARGV[at], ARGV[at + 1], ARGV[at + 2]
  if action == 'schedule' then
    redis.call('ZADD', KEYS[7], fire_at, member)
  else
    redis.call('ZREM', KEYS[7], member)
  end
  at = at + 3
end
for _ = 1, n_spawns do
  local seq = next_seq('spawn')
  redis.call('ZADD', KEYS[6], seq, seq .. ' ' .. ARGV[at])
  at = at + 1
end
if ARGV[14] ~= '' then
  record_trace(KEYS[8], KEYS[9], now, ARGV[14], ARGV[13])
end
write_execution(found, table.concat(seqs, ','), now, KEYS[10])
local reply = {}
for i, seq in ipairs(seqs) do
  reply[i] = tonumber(seq)
end
return reply
