-- Shared by the queue scripts; every queue script declares the same KEYS (QueueKeys.all()).
-- An item is addressed by "<tenant segment>:<id segment>" and its columns are fields of one
-- small hash per item, "<queue prefix>:item:<item>", in the queue's slot (the namespace is the
-- hash tag). Those keys are built here from the declared meta key's prefix: a claim picks its
-- item inside the script, so they cannot be declared beforehand. Every value a script reads
-- (state, token, attempts, due time, expiry) is a hash field of its own.
local META, READY, DELAYED, LEASES, WORKERS, DEAD, TURNS, ROTATION, DEDUPE, COUNTERS, LEGACY =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10],
  KEYS[11]
local ITEM_PREFIX = string.sub(META, 1, #META - #'meta') .. 'item:'

-- The namespace's layout version (keys.QUEUE_LAYOUT): a namespace written in another layout is
-- refused, never misread. Layout 1 kept every column in one hash (LEGACY) and had no meta key.
local LAYOUT = '2'
local found_layout = redis.call('HGET', META, 'layout')
if found_layout ~= LAYOUT then
  if found_layout or redis.call('EXISTS', LEGACY) == 1 then
    return redis.error_reply('RUNYARD_LAYOUT ' .. (found_layout or '1') .. ' ' .. LAYOUT)
  end
  redis.call('HSET', META, 'layout', LAYOUT)
end

local ITEM_COLUMNS = {'payload', 'priority', 'state', 'attempts', 'available', 'enqueued',
  'dedupe', 'worker', 'expires', 'error', 'claimed', 'token', 'dead_reason', 'dead_at'}

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

-- Time: ARGV carries the injected clock's reading, or '' to use the server's clock (TIME), so
-- the processes sharing a queue agree on it whatever their own clocks say. Scripts are
-- replicated by effects (Redis 7), so reading TIME in a writing script is allowed.
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

-- keys.time_key: 16 hex digits of the big-endian IEEE 754 double, which sort like the time
-- (a positive normal number: x = m * 2^e with 0.5 <= m < 1, so the biased exponent is
-- e + 1022 and the 52 fraction bits are (2m - 1) * 2^52; written as two 32-bit halves).
local function time_key(moment)
  local x = math.max(tonumber(moment), 0)
  if x == 0 then
    return '0000000000000000'
  end
  local m, e = math.frexp(x)
  local fraction = (m * 2 - 1) * 2 ^ 52
  local high = (e + 1022) * 2 ^ 20 + math.floor(fraction / 2 ^ 32)
  return string.format('%08x%08x', high, fraction % 2 ^ 32)
end

local function num16(n)
  return string.format('%016d', n)
end

-- The key of an item's hash.
local function ikey(item)
  return ITEM_PREFIX .. item
end

local function get(item, column)
  return redis.call('HGET', ikey(item), column)
end

local function set(item, ...)
  redis.call('HSET', ikey(item), ...)
end

local function clear(item, ...)
  redis.call('HDEL', ikey(item), ...)
end

-- A payload of PAYLOAD_PART bytes or less is the field `payload`. A longer one, up to
-- PAYLOAD_PARTS_MAX parts, is split into fields p1..pn (`parts` = n) of at most PAYLOAD_PART
-- bytes each, so the item's hash stays a listpack (hash-max-listpack-value defaults to 64):
-- about 360 bytes for a 100-byte payload instead of about 740 as a hashtable. Longer payloads
-- stay whole (a hashtable either way; the payload dominates). items.py mirrors this.
local PAYLOAD_PART, PAYLOAD_PARTS_MAX = 64, 16

local function store_payload(item, payload)
  if #payload <= PAYLOAD_PART or #payload > PAYLOAD_PART * PAYLOAD_PARTS_MAX then
    set(item, 'payload', payload)
    return
  end
  local flat, n = {}, 0
  for at = 1, #payload, PAYLOAD_PART do
    n = n + 1
    flat[#flat + 1] = 'p' .. n
    flat[#flat + 1] = string.sub(payload, at, at + PAYLOAD_PART - 1)
  end
  set(item, 'parts', n, unpack(flat))
end

local function split_payload(item)
  local parts = get(item, 'parts')
  if not parts then
    return false
  end
  local names = {}
  for i = 1, tonumber(parts) do
    names[i] = 'p' .. i
  end
  return table.concat(redis.call('HMGET', ikey(item), unpack(names)))
end

-- The reply for one item: tenant, id, then ITEM_COLUMNS in order (false when absent).
local function item_reply(item, tenant, id)
  local values = redis.call('HMGET', ikey(item), unpack(ITEM_COLUMNS))
  if not values[1] then
    values[1] = split_payload(item)
  end
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
  local v = redis.call('HMGET', ikey(item), 'pkey', 'available', 'seq')
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
  local v = redis.call('HMGET', ikey(item), 'state', 'token', 'claimed', 'expires')
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
-- renew_to is now + lease_seconds (see plus()); values are kept as exact text.
local function renewed_expiry(item, renew_to, max_lease)
  local cap = tonumber(get(item, 'claimed')) + tonumber(max_lease)
  if tonumber(renew_to) <= cap then
    return renew_to
  end
  return string.format('%.17g', cap)
end

-- Mirrors MemoryQueueCore._kill.
local function kill(item, tenant, id, reason, error_text, now)
  local now_key = time_key(now)
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
-- outcome, retry delay (seconds after now), reason. Attempts past the table use its last row.
-- Returns outcome, retry time (now + delay), reason.
local function decision(first, attempts, now)
  local count = tonumber(ARGV[first])
  local row = math.min(math.max(attempts, 1), count)
  local at = first + 1 + (row - 1) * 3
  local retry_at = false
  if ARGV[at + 1] ~= '' then
    retry_at = plus(now, ARGV[at + 1])
  end
  return ARGV[at], retry_at, ARGV[at + 2]
end
