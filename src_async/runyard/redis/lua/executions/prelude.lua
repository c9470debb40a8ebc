-- Shared by the execution store's scripts. Times arrive as text from the caller's injected clock
-- and are stored as given, or as '' when no clock was injected: then the server's clock (TIME)
-- decides, so a client whose clock runs fast cannot push the outbox sequence forward. A commit script's KEYS[1..4] are the execution hash, its processed
-- set, and its shard's counters and listing index (and, last, the shard's processed-ages index); its ARGV[1..10] are the expected version,
-- now, the execution id, the processed event id ('' none), definition_id, status, parent_id
-- ('' none), root_path, the context JSON and the commit id (a per-call nonce the execution
-- keeps, so a caller whose reply was lost can tell its own commit from another worker's).

-- The time for a script: `arg` (an injected clock's reading) or, when '', the server's TIME.
local function clock(arg)
  if arg ~= '' then
    return arg
  end
  local t = redis.call('TIME')
  return string.format('%.6f', tonumber(t[1]) + tonumber(t[2]) / 1000000)
end

local function found_version(exe_key)
  return tonumber(redis.call('HGET', exe_key, 'version') or '0')
end

-- A lost compare-and-swap is an error reply carrying the stored version (0: absent).
local function conflict(found)
  return redis.error_reply('CONFLICT ' .. found)
end

-- Writes the execution (a create takes the shard's next creation seq and joins the listing
-- index) and its processed mark. `seqs` is the commit's outbox seqs, kept for a read-back;
-- `now` is clock(ARGV[2]); `age_key` is the shard's processed-ages index.
local function write_execution(found, seqs, now, age_key)
  local exe_key = KEYS[1]
  if found == 0 then
    local created = redis.call('HINCRBY', KEYS[3], 'created', 1)
    redis.call('ZADD', KEYS[4], created, ARGV[3])
    redis.call('HSET', exe_key, 'created_at', now, 'seq', created)
  end
  redis.call('HSET', exe_key, 'version', found + 1, 'updated_at', now, 'definition_id', ARGV[5],
    'status', ARGV[6], 'parent_id', ARGV[7], 'root_path', ARGV[8], 'context', ARGV[9],
    'seqs', seqs, 'commit_id', ARGV[10])
  if ARGV[4] ~= '' and redis.call('SADD', KEYS[2], ARGV[4]) == 1 then
    -- A new mark joins the shard's processed-ages index (scored by now) for prune_processed;
    -- the member is the length-prefixed execution id followed by the event id.
    redis.call('ZADD', age_key, now, string.len(ARGV[3]) .. ':' .. ARGV[3] .. ARGV[4])
  end
end

-- Appends a step to the ring with the execution's next index and keeps the last `keep`.
local function record_trace(list_key, index_key, now, step, keep)
  local index = redis.call('INCR', index_key)
  redis.call('RPUSH', list_key, string.format('%d', index) .. ' ' .. now .. ' ' .. step)
  redis.call('LTRIM', list_key, -tonumber(keep), -1)
  return index
end
