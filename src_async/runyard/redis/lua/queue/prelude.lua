-- Shared by the queue scripts. KEYS[1..14] are the queue's fixed keys (QueueKeys.all()), in
-- every script; an item is addressed by "<tenant segment><id segment>" and its columns are
-- fields of one small hash per item, "{<ns>}:i:<item>"; each tenant's ready line is a sorted set
-- of its own, "<ready>:<tenant segment>". Every value a script reads (state, token, attempts,
-- due time, expiry) is a hash field of its own.
--
-- Item and line keys are declared: a script told which items it works on (enqueue,
-- enqueue_many, complete, fail, heartbeat, heartbeat_many, settle_many, cancel, requeue,
-- get_item) gets their keys, and their tenants' lines where it may touch them, in KEYS[15..]
-- (QueueKeys.item / QueueKeys.line), and every access checks that its key was declared, so a
-- key the caller did not declare fails the script ('RUNYARD_UNDECLARED <key>') instead of
-- being used. Only a script that picks its items inside (claim, claim_many, reap, adopt,
-- dead_letters, purge_dead, and enqueue's dedupe hit, which finds an existing item) builds
-- keys, with chosen_item() at the point where it picks: the caller cannot know them before
-- the call, and one round trip per operation rules out asking first. They are built from the
-- declared meta key's hash tag (the namespace), so they are in the queue's slot and Redis
-- Cluster runs the script. BullMQ does the same: moveToActive builds the key of the job it
-- pops from a key prefix passed in ARGV, while moveToFinished declares the job's key.
local META, READY, DELAYED, LEASES, WORKERS, DEAD, TURNS, ROTATION, DEDUPE, COUNTERS, LEGACY =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10],
  KEYS[11]
local WAKE, TENANTS, IDLE = KEYS[12], KEYS[13], KEYS[14]
local ITEM_PREFIX = string.match(META, '{[^}]*}') .. ':i:'
local declared = {}
for i = 15, #KEYS do
  declared[KEYS[i]] = true
end

-- The key, once checked that it was declared (or chosen by the script).
local function usable(key)
  if not declared[key] then
    error({err = 'RUNYARD_UNDECLARED ' .. key})
  end
  return key
end

-- The namespace's layout version (keys.QUEUE_LAYOUT): a namespace written in another layout is
-- refused, never misread. Layout 1 kept every column in one hash (LEGACY) and had no meta key.
local LAYOUT = '3'
local found_layout = redis.call('HGET', META, 'layout')
if found_layout ~= LAYOUT then
  if found_layout or redis.call('EXISTS', LEGACY) == 1 then
    return redis.error_reply('RUNYARD_LAYOUT ' .. (found_layout or '1') .. ' ' .. LAYOUT)
  end
  redis.call('HSET', META, 'layout', LAYOUT)
end

-- wake.WAKE_LIST_MAX: the wake key keeps at most this many hints.
local WAKE_MAX = 64

local function seg(s)
  return #s .. ':' .. s
end

local function item_field(tenant, id)
  return seg(tenant) .. seg(id)
end

-- Splits "<tenant segment><id segment>" back into tenant and id.
local function split_item(item)
  local n = string.match(item, '^(%d+):')
  local tenant_start = #n + 2
  local tenant = string.sub(item, tenant_start, tenant_start + tonumber(n) - 1)
  local rest = string.sub(item, tenant_start + tonumber(n))
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

-- n (a non-negative integer below 2^(8 * width)) as `width` big-endian bytes: sorts like n.
local function bytes(n, width)
  local out = {}
  for i = width, 1, -1 do
    out[i] = string.char(n % 256)
    n = math.floor(n / 256)
  end
  return table.concat(out)
end

-- The big-endian IEEE 754 double of a non-negative time, which sorts like the time (a
-- positive normal number: x = m * 2^e with 0.5 <= m < 1, so the biased exponent is e + 1022
-- and the 52 fraction bits are (2m - 1) * 2^52), as two 32-bit halves.
local function time_halves(moment)
  local x = math.max(tonumber(moment), 0)
  if x == 0 then
    return 0, 0
  end
  local m, e = math.frexp(x)
  local fraction = (m * 2 - 1) * 2 ^ 52
  return (e + 1022) * 2 ^ 20 + math.floor(fraction / 2 ^ 32), fraction % 2 ^ 32
end

-- keys.time_key: those 8 bytes as 16 hex digits.
local function time_key(moment)
  local high, low = time_halves(moment)
  return string.format('%08x%08x', high, low)
end

local function time_bytes(moment)
  local high, low = time_halves(moment)
  return bytes(high, 4) .. bytes(low, 4)
end

local function num16(n)
  return string.format('%016d', n)
end

-- The key of an item's hash.
local function ikey(item)
  return usable(ITEM_PREFIX .. item)
end

-- Item hash fields (items.py FIELDS mirrors them); a field at its default is left out:
-- p payload (or chunks 1..n; see store_payload), q priority (0), s state ('l' leased, 'd'
-- dead; ready), a attempts (0), v available (enqueued), k dedupe, m max attempts, w worker,
-- x lease expiry, c claimed at, t token, r last error, dr dead reason, dt dead at, h header
-- (only beside a large payload). The header (HEADER bytes: enqueued_at as a big-endian
-- double, then the readiness seq in 5 bytes) is rarely read, so it is packed in front of the
-- payload.
local function get(item, column)
  return redis.call('HGET', ikey(item), column)
end

local function set(item, ...)
  redis.call('HSET', ikey(item), ...)
end

local function clear(item, ...)
  redis.call('HDEL', ikey(item), ...)
end

local function exists(item)
  return redis.call('EXISTS', ikey(item)) == 1
end

-- One tenant's ready line: a sorted set per tenant (see ready_member).
local function line(tenant)
  return usable(READY .. ':' .. seg(tenant))
end

-- Makes the line of a tenant the script picked itself (from the rotation) usable.
local function chosen_line(tenant)
  declared[READY .. ':' .. seg(tenant)] = true
end

-- Makes an item the script picked itself (from an index or the dedupe hash) usable: its hash
-- and its tenant's line (see the top of this file).
local function chosen_item(item, tenant)
  declared[ITEM_PREFIX .. item] = true
  chosen_line(tenant)
end

local function attempts_of(item)
  return tonumber(get(item, 'a') or 0)
end

local function set_attempts(item, n)
  if n > 0 then
    set(item, 'a', n)
  else
    clear(item, 'a')
  end
end

-- The header and the payload: header .. payload is the field `p` when PAYLOAD_PART bytes or
-- less; a longer one, up to PAYLOAD_PARTS_MAX parts, is split into fields 1..n of at most
-- PAYLOAD_PART bytes each, so the item's hash stays a listpack (hash-max-listpack-value
-- defaults to 64; 63 bytes keep a one-byte entry header). Past that the payload is `p`
-- alone and the header `h` (a hashtable either way; the payload dominates). items.py reads
-- them back.
local HEADER, PAYLOAD_PART, PAYLOAD_PARTS_MAX = 13, 63, 16

local function store_payload(item, header, payload)
  local blob = header .. payload
  if #blob > PAYLOAD_PART * PAYLOAD_PARTS_MAX then
    set(item, 'h', header, 'p', payload)
  elseif #blob <= PAYLOAD_PART then
    set(item, 'p', blob)
  else
    local flat, n = {}, 0
    for at = 1, #blob, PAYLOAD_PART do
      n = n + 1
      flat[#flat + 1] = tostring(n)
      flat[#flat + 1] = string.sub(blob, at, at + PAYLOAD_PART - 1)
    end
    set(item, unpack(flat))
  end
end

-- The field holding the header, and its value (the header, or the header and more).
local function header_field(item)
  local h = get(item, 'h')
  if h then
    return 'h', h
  end
  local v = redis.call('HMGET', ikey(item), 'p', '1')
  if v[1] then
    return 'p', v[1]
  end
  return '1', v[2]
end

local function header_of(item)
  local _, value = header_field(item)
  return string.sub(value, 1, HEADER)
end

-- The time in a header's first 8 bytes (time_bytes undone), as exact text.
local function header_time(header)
  local b = {string.byte(header, 1, 8)}
  local high = ((b[1] * 256 + b[2]) * 256 + b[3]) * 256 + b[4]
  local low = ((b[5] * 256 + b[6]) * 256 + b[7]) * 256 + b[8]
  if high == 0 and low == 0 then
    return '0'
  end
  local fraction = (high % 2 ^ 20) * 2 ^ 32 + low
  local x = math.ldexp((fraction / 2 ^ 52 + 1) / 2, math.floor(high / 2 ^ 20) - 1022)
  return string.format('%.17g', x)
end

-- The reply for one item: tenant, id, then its fields as HGETALL lists them, the header taken
-- out of the payload and given as `e` (enqueued_at, text), so a reply holds text only.
local function item_reply(item, tenant, id)
  local flat = redis.call('HGETALL', ikey(item))
  local separate = get(item, 'h')
  local header = separate
  local out = {}
  for i = 1, #flat, 2 do
    local name, value = flat[i], flat[i + 1]
    if name ~= 'h' then
      if not separate and (name == 'p' or name == '1') then
        header = string.sub(value, 1, HEADER)
        value = string.sub(value, HEADER + 1)
      end
      out[#out + 1] = name
      out[#out + 1] = value
    end
  end
  out[#out + 1] = 'e'
  out[#out + 1] = header_time(header)
  return {tenant, id, out}
end

-- Gives the item a new readiness seq (in its header).
local function set_seq(item, seq)
  local field, value = header_field(item)
  set(item, field, string.sub(value, 1, 8) .. bytes(seq, 5) .. string.sub(value, HEADER + 1))
end

-- A member of a tenant's ready line: priority (highest first, 4 bytes), due time (8),
-- readiness seq (5), id; so the head is the highest-priority item that became due first
-- (mirrors the memory model's (-priority, available_at, seq) order). Without `v` the due time
-- is the enqueue time, the header's first 8 bytes (the same encoding).
local LINE_ORDER_BYTES = 17

local function ready_member(item, id)
  local v = redis.call('HMGET', ikey(item), 'q', 'v')
  local header = header_of(item)
  local due = string.sub(header, 1, 8)
  if v[2] then
    due = time_bytes(v[2])
  end
  return bytes(2147483647 - tonumber(v[1] or 0), 4) .. due .. string.sub(header, 9) .. id
end

local function delayed_member(item)
  return string.sub(header_of(item), 9) .. item
end

-- Puts a ready item (its due time reached) in its tenant's line and the tenant in rotation.
local function enter_line(item, tenant, id)
  redis.call('ZADD', line(tenant), 0, ready_member(item, id))
  redis.call('HINCRBY', COUNTERS, 'ready', 1)
  redis.call('ZADD', ROTATION, 'NX', redis.call('HGET', TURNS, tenant), tenant)
end

-- Mirrors MemoryQueueCore._make_ready: a new seq, then delayed or in its tenant's line.
-- Returns true when the item is ready now.
local function make_ready(item, tenant, id, available, now)
  set_seq(item, redis.call('HINCRBY', COUNTERS, 'seq', 1))
  if tonumber(available) > tonumber(now) then
    redis.call('ZADD', DELAYED, available, delayed_member(item))
    return false
  end
  enter_line(item, tenant, id)
  return true
end

-- Makes up to `batch` due delayed items ready.
local function promote(now, batch)
  local due = redis.call('ZRANGEBYSCORE', DELAYED, '-inf', now, 'LIMIT', 0, batch)
  for _, member in ipairs(due) do
    redis.call('ZREM', DELAYED, member)
    local item = string.sub(member, 6)
    local tenant, id = split_item(item)
    chosen_item(item, tenant)
    enter_line(item, tenant, id)
  end
end

local function head(tenant)
  return redis.call('ZRANGE', line(tenant), 0, 0)[1]
end

-- Takes a ready or delayed item out of its line (and its tenant out of rotation when that
-- empties the line).
local function leave_line(item, tenant, id)
  redis.call('ZREM', DELAYED, delayed_member(item))
  if redis.call('ZREM', line(tenant), ready_member(item, id)) == 1 then
    redis.call('HINCRBY', COUNTERS, 'ready', -1)
    if not head(tenant) then
      redis.call('ZREM', ROTATION, tenant)
    end
  end
end

-- Item counts per tenant (TENANTS); a tenant left with none is listed in IDLE for prune,
-- scored by its turn, so prune forgets the least recently served first, ties by name (the
-- memory model's (turn, name) order). Entries written before the score was the turn have
-- score 0: harmless (each names a tenant with no item), prune takes them first, by name.
local function count_item(tenant, delta)
  local n = redis.call('HINCRBY', TENANTS, tenant, delta)
  if n <= 0 then
    redis.call('HDEL', TENANTS, tenant)
    redis.call('ZADD', IDLE, redis.call('HGET', TURNS, tenant) or 0, tenant)
  elseif n == delta then
    redis.call('ZREM', IDLE, tenant)
  end
end

-- Pushes up to `n` hints to the wake key (one per idle worker to wake), keeping it bounded.
local function wake(n)
  if n > 0 then
    local hints = {}
    for i = 1, math.min(n, WAKE_MAX) do
      hints[i] = '1'
    end
    redis.call('LPUSH', WAKE, unpack(hints))
    redis.call('LTRIM', WAKE, 0, WAKE_MAX - 1)
  end
end

-- Adds an item (mirrors MemoryQueueCore.enqueue); returns 'created' or 'exists', the item and
-- its tenant and id, and whether it is ready now. run_at and max_attempts are '' when absent.
local function enqueue_one(tenant, id, dedupe, payload, priority, now, delay, run_at, max)
  local item = item_field(tenant, id)
  if exists(item) then
    return 'exists', item, tenant, id, false
  end
  local dedupe_field = seg(tenant) .. seg(dedupe)
  if dedupe ~= '' then
    local other = redis.call('HGET', DEDUPE, dedupe_field)
    if other then
      local found = item_field(tenant, other)
      chosen_item(found, tenant)
      return 'exists', found, tenant, other, false
    end
    redis.call('HSET', DEDUPE, dedupe_field, id)
    set(item, 'k', dedupe)
  end
  local available = now
  if tonumber(delay) > 0 then
    available = plus(now, delay)
  elseif run_at ~= '' and tonumber(run_at) > tonumber(now) then
    available = run_at
  end
  store_payload(item, time_bytes(now) .. bytes(0, 5), payload)
  if available ~= now then
    set(item, 'v', available)
  end
  if priority ~= '0' then
    set(item, 'q', priority)
  end
  if max ~= '' then
    set(item, 'm', max)
  end
  redis.call('HSETNX', TURNS, tenant, redis.call('HGET', COUNTERS, 'turn') or 0)
  count_item(tenant, 1)
  return 'created', item, tenant, id, make_ready(item, tenant, id, available, now)
end

-- Deletes an item that is in no line and holds no lease (complete, cancel, purge).
local function forget(item, tenant)
  local dedupe = get(item, 'k')
  if dedupe then
    redis.call('HDEL', DEDUPE, seg(tenant) .. seg(dedupe))
  end
  redis.call('DEL', ikey(item))
  count_item(tenant, -1)
end

-- Leases the head of the tenant whose turn it is (lowest turn, ties by name; O(log T)) with a
-- fresh token and advances the rotation (mirrors MemoryQueueCore.claim); nil when none.
local function claim_one(worker, now, expires)
  local first = redis.call('ZRANGE', ROTATION, 0, 0)
  if #first == 0 then
    return nil
  end
  local tenant = first[1]
  chosen_line(tenant)
  -- The head and whether another item follows it: one read serves both.
  local heads = redis.call('ZRANGE', line(tenant), 0, 1)
  local member = heads[1]
  redis.call('ZREM', line(tenant), member)
  redis.call('HINCRBY', COUNTERS, 'ready', -1)
  local id = string.sub(member, LINE_ORDER_BYTES + 1)
  local item = item_field(tenant, id)
  chosen_item(item, tenant)
  local turn = redis.call('HINCRBY', COUNTERS, 'turn', 1)
  redis.call('HSET', TURNS, tenant, turn)
  if heads[2] then
    redis.call('ZADD', ROTATION, turn, tenant)
  else
    redis.call('ZREM', ROTATION, tenant)
  end
  local token = redis.call('HINCRBY', COUNTERS, 'token', 1)
  set(item, 's', 'l', 'a', attempts_of(item) + 1, 'w', worker, 'x', expires, 't', token,
    'c', now)
  redis.call('ZADD', LEASES, expires, num16(token) .. item)
  redis.call('ZADD', WORKERS, 0, seg(worker) .. num16(token) .. item)
  return item_reply(item, tenant, id)
end

-- Drops the lease index entries of a leased item.
local function unindex(item)
  local v = redis.call('HMGET', ikey(item), 't', 'w')
  local token = num16(tonumber(v[1]))
  redis.call('ZREM', LEASES, token .. item)
  redis.call('ZREM', WORKERS, seg(v[2]) .. token .. item)
end

-- Drops the lease index entries of a leased item and its lease fields.
local function unlease(item)
  unindex(item)
  clear(item, 's', 'w', 'x', 'c', 't')
end

-- Mirrors MemoryQueueCore._leased: unknown, then taken, then capped, then expired.
local function lease_error(item, token, now, max_lease)
  if not exists(item) then
    return {'not_found'}
  end
  local v = redis.call('HMGET', ikey(item), 's', 't', 'c', 'x')
  if v[1] ~= 'l' or v[2] ~= token then
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
  local cap = tonumber(get(item, 'c')) + tonumber(max_lease)
  if tonumber(renew_to) <= cap then
    return renew_to
  end
  return string.format('%.17g', cap)
end

-- Extends a held lease (fenced); the item's reply, or the refusal.
local function heartbeat_one(tenant, id, token, now, renew_to, max_lease)
  local item = item_field(tenant, id)
  local lost = lease_error(item, token, now, max_lease)
  if lost then
    return lost
  end
  local expires = renewed_expiry(item, renew_to, max_lease)
  set(item, 'x', expires)
  redis.call('ZADD', LEASES, expires, num16(tonumber(token)) .. item)
  return {'ok', item_reply(item, tenant, id)}
end

-- Finishes an item (fenced): deleted, its dedupe key freed. {'ok'} or the refusal.
local function complete_one(tenant, id, token, now, max_lease)
  local item = item_field(tenant, id)
  local lost = lease_error(item, token, now, max_lease)
  if lost then
    return lost
  end
  unindex(item)  -- its fields go with it
  forget(item, tenant)
  return {'ok'}
end

-- Mirrors MemoryQueueCore._kill.
local function kill(item, tenant, id, reason, error_text, now)
  unlease(item)
  if error_text then
    set(item, 'r', error_text)
  end
  set(item, 's', 'd', 'dr', reason, 'dt', now)
  redis.call('ZADD', DEAD, 0, seg(tenant) .. time_key(now) .. id)
end

-- Mirrors MemoryQueueCore._retry; true when the item is ready now.
local function retry(item, tenant, id, at, error_text, now)
  unlease(item)
  if error_text then
    set(item, 'r', error_text)
  end
  set(item, 'v', at)
  return make_ready(item, tenant, id, at, now)
end

-- Hands a held item back to ready at once, its attempt not counted (fenced).
local function release_one(tenant, id, token, now, max_lease)
  local item = item_field(tenant, id)
  local lost = lease_error(item, token, now, max_lease)
  if lost then
    return lost
  end
  set_attempts(item, attempts_of(item) - 1)
  retry(item, tenant, id, now, false, now)
  return {'ok'}
end

-- Retry and dead-letter decisions (QueuePolicy's, per item): a table from ARGV[first]: the
-- policy's max_attempts, a row count, then the retry delay (seconds) for attempt 1, 2, ...
-- (attempts past the table use its last row; items.retry_table builds it, with the jitter
-- drawn from the policy's random). An item's own max attempts (field m) replaces the policy's.
local function attempt_limit(item, first)
  return tonumber(get(item, 'm') or ARGV[first])
end

local function retry_at(first, attempts, now)
  local rows = tonumber(ARGV[first + 1])
  return plus(now, ARGV[first + 1 + math.min(math.max(attempts, 1), rows)])
end

-- A lapsed lease (mirrors QueuePolicy.on_lapse): retried after the backoff, or dead.
local function lapse(item, tenant, id, now, first)
  local attempts, limit = attempts_of(item), attempt_limit(item, first)
  if attempts >= limit then
    kill(item, tenant, id, 'lease lapsed on attempt ' .. attempts .. ' of ' .. limit,
      'lease lapsed', now)
  else
    retry(item, tenant, id, retry_at(first, attempts, now), 'lease lapsed', now)
  end
end

-- Returns up to `limit` lapsed leases (now > expiry) to ready or the dead letter, oldest
-- expiry first; their replies.
local function reclaim(now, limit, first)
  local out = {}
  if limit <= 0 then
    return out
  end
  local lapsed = redis.call('ZRANGEBYSCORE', LEASES, '-inf', '(' .. now, 'LIMIT', 0, limit)
  for _, member in ipairs(lapsed) do
    local item = string.sub(member, 17)
    local tenant, id = split_item(item)
    chosen_item(item, tenant)
    lapse(item, tenant, id, now, first)
    out[#out + 1] = item_reply(item, tenant, id)
  end
  return out
end
