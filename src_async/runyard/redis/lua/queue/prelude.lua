-- Shared by the queue scripts; every queue script declares the same KEYS (QueueKeys.all()).
-- An item is addressed by "<tenant segment>:<id segment>" and its columns are fields
-- "<item>:<column>" of one hash, so every key a script touches is declared and every value a
-- script reads (state, token, attempts, due time, expiry) is a hash field of its own.
local ITEMS, READY, DELAYED, LEASES, WORKERS, DEAD, TURNS, ROTATION, DEDUPE, COUNTERS =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10]

local ITEM_COLUMNS = {'payload', 'priority', 'state', 'attempts', 'available', 'enqueued',
  'dedupe', 'worker', 'expires', 'error', 'claimed', 'token', 'dead_reason', 'dead_at'}
local ALL_COLUMNS = {'payload', 'priority', 'pkey', 'state', 'attempts', 'available',
  'enqueued', 'dedupe', 'worker', 'expires', 'error', 'claimed', 'token', 'seq',
  'dead_reason', 'dead_at', 'dead_key'}

local function seg(s)
  return #s .. ':' .. s
end

local function item_field(tenant, id)
  return seg(tenant) .. ':' .. seg(id)
end

-- Splits "<tenant segment>:<id segment>" back into tenant and id.
local function split_item(item)
  local n = string.match(item, '^(%d+):')
  local tenant_start = #n + 2
  local tenant = string.sub(item, tenant_start, tenant_start + tonumber(n) - 1)
  local rest = string.sub(item, tenant_start + tonumber(n) + 1)
  local m = string.match(rest, '^(%d+):')
  return tenant, string.sub(rest, #m + 2)
end

local function num16(n)
  return string.format('%016d', n)
end

local function get(item, column)
  return redis.call('HGET', ITEMS, item .. ':' .. column)
end

local function set(item, ...)
  local args = {...}
  local flat = {}
  for i = 1, #args, 2 do
    flat[#flat + 1] = item .. ':' .. args[i]
    flat[#flat + 1] = args[i + 1]
  end
  redis.call('HSET', ITEMS, unpack(flat))
end

local function clear(item, ...)
  local flat = {}
  for _, column in ipairs({...}) do
    flat[#flat + 1] = item .. ':' .. column
  end
  redis.call('HDEL', ITEMS, unpack(flat))
end

-- The reply for one item: tenant, id, then ITEM_COLUMNS in order (false when absent).
local function item_reply(item, tenant, id)
  local names = {}
  for i, column in ipairs(ITEM_COLUMNS) do
    names[i] = item .. ':' .. column
  end
  local values = redis.call('HMGET', ITEMS, unpack(names))
  local out = {tenant, id}
  for i = 1, #ITEM_COLUMNS do
    out[#out + 1] = values[i]
  end
  return out
end

-- A member of the ready line: tenant, then priority (highest first), due time, readiness seq,
-- so a tenant's head is its highest-priority item that became due first (mirrors the memory
-- model's (-priority, available_at, seq) order). Times are non-negative seconds.
local function ready_member(item, tenant, id)
  local v = redis.call('HMGET', ITEMS, item .. ':pkey', item .. ':available', item .. ':seq')
  return seg(tenant) .. v[1] .. string.format('%017.6f', tonumber(v[2])) ..
    num16(tonumber(v[3])) .. id
end

-- Puts a ready item (its due time reached) in its tenant's line and the tenant in rotation.
local function enter_line(item, tenant, id)
  redis.call('ZADD', READY, 0, ready_member(item, tenant, id))
  redis.call('ZADD', ROTATION, 'NX', redis.call('HGET', TURNS, tenant), tenant)
end

-- Mirrors MemoryQueueCore._make_ready: a new seq, then delayed or in its tenant's line.
local function make_ready(item, tenant, id, available, now)
  local seq = redis.call('HINCRBY', COUNTERS, 'seq', 1)
  set(item, 'seq', seq)
  if tonumber(available) > tonumber(now) then
    redis.call('ZADD', DELAYED, available, num16(seq) .. item)
  else
    enter_line(item, tenant, id)
  end
end

-- The head of a tenant's ready line (highest priority, then oldest), or nil.
-- The length of a ready member before the id: tenant segment, pkey, due time, seq.
local function line_prefix_length(tenant)
  return #seg(tenant) + 16 + 17 + 16
end

local function head(tenant)
  local prefix = seg(tenant)
  local found = redis.call('ZRANGEBYLEX', READY, '[' .. prefix, '(' .. prefix .. '\255',
    'LIMIT', 0, 1)
  return found[1]
end

-- Drops the lease index entries of a leased item.
local function unlease(item)
  local token = num16(tonumber(get(item, 'token')))
  redis.call('ZREM', LEASES, token .. item)
  redis.call('ZREM', WORKERS, seg(get(item, 'worker')) .. token .. item)
end

-- Mirrors MemoryQueueCore._leased: unknown, then taken, then capped, then expired.
local function lease_error(item, id, token, now, max_lease)
  local v = redis.call('HMGET', ITEMS, item .. ':state', item .. ':token', item .. ':claimed',
    item .. ':expires')
  if not v[1] then
    return {'not_found'}
  end
  if v[1] ~= 'leased' or v[2] ~= token then
    return {'lease_lost', 'taken'}
  end
  if tonumber(now) >= tonumber(v[3]) + tonumber(max_lease) then
    return {'lease_lost', 'capped'}
  end
  if tonumber(now) > tonumber(v[4]) then
    return {'lease_lost', 'expired'}
  end
  return nil
end

-- Mirrors QueuePolicy.lease_expiry: min(now + lease_seconds, claimed_at + max_lease_seconds).
-- renew_to is now + lease_seconds as the caller computed it; values are kept as exact text.
local function renewed_expiry(item, renew_to, max_lease)
  local cap = tonumber(get(item, 'claimed')) + tonumber(max_lease)
  if tonumber(renew_to) <= cap then
    return renew_to
  end
  return string.format('%.17g', cap)
end

-- Mirrors MemoryQueueCore._kill.
local function kill(item, tenant, id, reason, error_text, now, now_key)
  unlease(item)
  clear(item, 'worker', 'expires', 'claimed', 'token')
  if error_text then
    set(item, 'error', error_text)
  end
  set(item, 'state', 'dead', 'dead_reason', reason, 'dead_at', now, 'dead_key', now_key)
  redis.call('ZADD', DEAD, 0, seg(tenant) .. now_key .. id)
end

-- Mirrors MemoryQueueCore._retry.
local function retry(item, tenant, id, at, error_text, now)
  unlease(item)
  clear(item, 'worker', 'expires', 'claimed', 'token')
  if error_text then
    set(item, 'error', error_text)
  end
  set(item, 'state', 'ready', 'available', at)
  make_ready(item, tenant, id, at, now)
end

-- A decision table from QueuePolicy, starting at ARGV[first]: count, then per attempt number
-- outcome, retry_at, reason. Attempts past the table use its last row.
local function decision(first, attempts)
  local count = tonumber(ARGV[first])
  local row = math.min(math.max(attempts, 1), count)
  local at = first + 1 + (row - 1) * 3
  return ARGV[at], ARGV[at + 1], ARGV[at + 2]
end
