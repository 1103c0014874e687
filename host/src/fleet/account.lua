-- One model's request and token buckets and its adaptive throttle, shared by a
-- fleet of gateways: the arithmetic of host/src/admission/{bucket,throttle,store}.rs,
-- to the unit, run atomically inside Redis. Nothing ticks: a level is refilled
-- by the clock here, when it is read.
--
-- KEYS[1]  the account's hash
-- ARGV     op, clock seconds, clock nanoseconds ("" "": Redis's own TIME),
--          rpm, tpm ("" = unlimited), then the op's arguments:
--   take      requests, tokens, interactive share (millionths)
--             -> {0, tenths, requests left, tokens left (-1: unlimited)} granted | {1, wait_ns, tenths} | {2, axis (1 requests, 2 tokens), demand, limit, reserved}
--   forecast  requests, tokens, share        -> {wait_ns}
--   give      requests, tokens               -> {}
--   lease     returned requests, returned tokens, demand requests, demand tokens,
--             extra requests, extra tokens (a gateway's block, host/src/fleet/lease.rs):
--             gives the returned amounts back, then takes the demand whole as
--             `take` does (no reserve), then up to the extra on each axis from
--             what is left
--             -> {0, tenths, requests left, tokens left, extra requests, extra tokens} | {1, wait_ns, tenths} | {2, axis, demand, limit, 0}
--   feedback  backpressure weight, or s (a success) -> {tenths}
--   coefficient                              -> {tenths}
--
-- Levels are in units of 1/600 000 000 000 of a token, as in bucket.rs; they
-- outgrow a Lua number's 53 exact bits, so they are kept as base-10^6 digit
-- arrays (little-endian) and stored as decimal strings. Each bucket's level
-- is refilled to now once per run.

local BASE = 1000000
local UNITS_PER_TOKEN = {0, 600000} -- 600 000 000 000 in base-10^6 digits
-- A share's reserve is `capacity × millionths × 600 000` units exactly
-- (`UNITS_PER_TOKEN / 10^6` is whole), so no rounding happens there.
local UNITS_PER_MILLIONTH = 600000
local NS_PER_S = 1000000000
local MAX_TENTHS = 90
local QUIET_AFTER_S = 300
local MAX_GAP_S = 1000000 -- a longer silence refills any bucket anyway
local IDLE_EXPIRY_S = 86400

-- Arbitrary-precision non-negative integers ---------------------------------

local function big(n)
  if n == 0 then return {0} end
  local digits = {}
  while n > 0 do
    local digit = n % BASE
    digits[#digits + 1] = digit
    n = (n - digit) / BASE
  end
  return digits
end

local function trim(a)
  while #a > 1 and a[#a] == 0 do a[#a] = nil end
  return a
end

local function cmp(a, b)
  if #a ~= #b then return #a < #b and -1 or 1 end
  for i = #a, 1, -1 do
    if a[i] ~= b[i] then return a[i] < b[i] and -1 or 1 end
  end
  return 0
end

local function add(a, b)
  local sum, carry = {}, 0
  for i = 1, math.max(#a, #b) do
    local digit = (a[i] or 0) + (b[i] or 0) + carry
    if digit >= BASE then sum[i] = digit - BASE; carry = 1 else sum[i] = digit; carry = 0 end
  end
  if carry > 0 then sum[#sum + 1] = carry end
  return sum
end

-- a - b, for a >= b.
local function sub(a, b)
  local difference, borrow = {}, 0
  for i = 1, #a do
    local digit = a[i] - (b[i] or 0) - borrow
    if digit < 0 then difference[i] = digit + BASE; borrow = 1 else difference[i] = digit; borrow = 0 end
  end
  return trim(difference)
end

local function mul(a, b)
  local product = {}
  for i = 1, #a + #b do product[i] = 0 end
  for i = 1, #a do
    local carry = 0
    for j = 1, #b do
      local t = product[i + j - 1] + a[i] * b[j] + carry
      carry = math.floor(t / BASE)
      product[i + j - 1] = t - carry * BASE
    end
    local k = i + #b
    while carry > 0 do
      local t = product[k] + carry
      carry = math.floor(t / BASE)
      product[k] = t - carry * BASE
      k = k + 1
    end
  end
  return trim(product)
end

-- Quotient and remainder of a / d, for an integer 0 < d < 9 * 10^9 (so every
-- partial stays below 2^53); each quotient digit is corrected exactly.
local function divmod(a, d)
  local quotient, rest = {}, 0
  for i = #a, 1, -1 do
    local t = rest * BASE + a[i]
    local q = math.floor(t / d)
    rest = t - q * d
    if rest < 0 then q = q - 1; rest = rest + d end
    if rest >= d then q = q + 1; rest = rest - d end
    quotient[i] = q
  end
  return trim(quotient), rest
end

local function div_ceil(a, d)
  local q, rest = divmod(a, d)
  if rest > 0 then q = add(q, {1}) end
  return q
end

local function min_big(a, b) if cmp(a, b) <= 0 then return a end return b end

-- A number for the answer, saturating at 2^53 (beyond it no wait matters).
local function small(a)
  if #a > 4 then return 9007199254740992 end
  local n = 0
  for i = #a, 1, -1 do n = n * BASE + a[i] end
  return math.min(n, 9007199254740992)
end

local function encode(a)
  local parts = {tostring(a[#a])}
  for i = #a - 1, 1, -1 do parts[#parts + 1] = string.format('%06d', a[i]) end
  return table.concat(parts)
end

local function decode(text)
  local digits = {}
  local i = #text
  while i >= 1 do
    local from = math.max(1, i - 5)
    digits[#digits + 1] = tonumber(string.sub(text, from, i))
    i = from - 1
  end
  return trim(digits)
end

-- The clock ---------------------------------------------------------------

local now_s, now_ns
if ARGV[2] ~= '' then
  now_s, now_ns = tonumber(ARGV[2]), tonumber(ARGV[3])
else
  local time = redis.call('TIME')
  now_s, now_ns = tonumber(time[1]), tonumber(time[2]) * 1000
end

-- Nanoseconds from (s, ns) to now, 0 if that is in the future.
local function since(s, ns)
  local gap = now_s - s
  if gap > MAX_GAP_S then return MAX_GAP_S * NS_PER_S end
  local elapsed = gap * NS_PER_S + (now_ns - ns)
  if elapsed < 0 then return 0 end
  return elapsed
end

-- The account -------------------------------------------------------------

local key = KEYS[1]
local stored = redis.call('HGETALL', key)
local fields = {}
for i = 1, #stored, 2 do fields[stored[i]] = stored[i + 1] end

local tenths = tonumber(fields.throttle or '0')
local stretch = 10 + tenths -- the bucket refills `stretch / 10` times slower

-- A bucket of `capacity` per minute, full when first seen (or when its
-- capacity changed: a new configuration starts from its own full bucket).
-- `current` is its level refilled to now.
local function bucket(prefix, capacity_text)
  if capacity_text == '' then return nil end
  local capacity = tonumber(capacity_text)
  local b = {prefix = prefix, capacity = capacity, max = mul(big(capacity), UNITS_PER_TOKEN)}
  if fields[prefix .. 'cap'] == capacity_text then
    b.level = decode(fields[prefix .. 'level'])
    b.s, b.ns = tonumber(fields[prefix .. 's']), tonumber(fields[prefix .. 'ns'])
  else
    b.level, b.s, b.ns = b.max, now_s, now_ns
  end
  local elapsed = since(b.s, b.ns)
  if elapsed == 0 then
    b.current = b.level
  else
    local refill = divmod(mul(big(elapsed), big(capacity * 100)), math.max(stretch, 10))
    b.current = min_big(add(b.level, refill), b.max)
  end
  return b
end

-- Stores the level reached now (before a take, a give or a new stretch).
local function settle(b)
  b.level = b.current
  if since(b.s, b.ns) > 0 then b.s, b.ns = now_s, now_ns end
end

local function reserved_units(b, share)
  if share == 0 then return {0} end
  return mul(big(b.capacity), big(share * UNITS_PER_MILLIONTH))
end

-- Nanoseconds from now until `needed` units are there: the shortfall times
-- the stretch, over `capacity × 100` units per nanosecond, rounded up (in two
-- steps, each exact: ceil(ceil(x / 100) / c) = ceil(x / 100c)).
local function supply_wait(b, needed)
  if cmp(b.current, needed) >= 0 then return 0 end
  local scaled = mul(sub(needed, b.current), big(math.max(stretch, 10)))
  local nanos = small(div_ceil(div_ceil(scaled, 100), math.max(b.capacity, 1)))
  local ahead = 0
  if since(b.s, b.ns) == 0 then
    ahead = (b.s - now_s) * NS_PER_S + (b.ns - now_ns)
  end
  return ahead + nanos
end

local function store(b)
  if b == nil then return end
  redis.call('HSET', key, b.prefix .. 'cap', tostring(b.capacity), b.prefix .. 'level', encode(b.level),
    b.prefix .. 's', tostring(b.s), b.prefix .. 'ns', tostring(b.ns))
end

local requests = bucket('r', ARGV[4])
local tokens = bucket('t', ARGV[5])

local function save()
  store(requests)
  store(tokens)
  redis.call('EXPIRE', key, IDLE_EXPIRY_S)
end

-- Whole requests (or tokens) left in `b`, rounded down; -1 for an unlimited
-- axis. Two exact divisions: by 10^6, then by 600 000 (UNITS_PER_TOKEN).
local function left(b)
  if b == nil then return -1 end
  return small(divmod(divmod(b.level, BASE), UNITS_PER_TOKEN[2]))
end

local function axes(demand_requests, demand_tokens)
  return {{requests, demand_requests, 1}, {tokens, demand_tokens, 2}}
end

local op = ARGV[1]

if op == 'take' or op == 'forecast' then
  local share = tonumber(ARGV[8])
  local wait = 0
  for _, axis in ipairs(axes(tonumber(ARGV[6]), tonumber(ARGV[7]))) do
    local b, demand = axis[1], axis[2]
    if b ~= nil then
      local needed = add(mul(big(demand), UNITS_PER_TOKEN), reserved_units(b, share))
      if op == 'take' and cmp(needed, b.max) > 0 then
        local reserved = small(div_ceil(mul(big(b.capacity), big(share)), 1000000))
        return {2, axis[3], demand, b.capacity, reserved}
      end
      wait = math.max(wait, supply_wait(b, needed))
    end
  end
  if op == 'forecast' then return {wait} end
  if wait > 0 then return {1, wait, tenths} end
  for _, axis in ipairs(axes(tonumber(ARGV[6]), tonumber(ARGV[7]))) do
    local b, demand = axis[1], axis[2]
    if b ~= nil then
      settle(b)
      b.level = sub(b.level, mul(big(demand), UNITS_PER_TOKEN))
      b.current = b.level
    end
  end
  save()
  return {0, tenths, left(requests), left(tokens)}
end

if op == 'give' then
  for _, axis in ipairs(axes(tonumber(ARGV[6]), tonumber(ARGV[7]))) do
    local b, amount = axis[1], axis[2]
    if b ~= nil then
      settle(b)
      b.level = min_big(add(b.level, mul(big(amount), UNITS_PER_TOKEN)), b.max)
      b.current = b.level
    end
  end
  save()
  return {}
end

if op == 'lease' then
  local returned = false
  for _, axis in ipairs(axes(tonumber(ARGV[6]), tonumber(ARGV[7]))) do
    local b, amount = axis[1], axis[2]
    if b ~= nil and amount > 0 then
      settle(b)
      b.level = min_big(add(b.level, mul(big(amount), UNITS_PER_TOKEN)), b.max)
      b.current = b.level
      returned = true
    end
  end
  local wait = 0
  for _, axis in ipairs(axes(tonumber(ARGV[8]), tonumber(ARGV[9]))) do
    local b, demand = axis[1], axis[2]
    if b ~= nil then
      local needed = mul(big(demand), UNITS_PER_TOKEN)
      if cmp(needed, b.max) > 0 then
        if returned then save() end
        return {2, axis[3], demand, b.capacity, 0}
      end
      wait = math.max(wait, supply_wait(b, needed))
    end
  end
  if wait > 0 then
    if returned then save() end
    return {1, wait, tenths}
  end
  local extras = {}
  for i, axis in ipairs(axes(tonumber(ARGV[8]), tonumber(ARGV[9]))) do
    local b, demand = axis[1], axis[2]
    local extra = 0
    if b ~= nil then
      settle(b)
      b.level = sub(b.level, mul(big(demand), UNITS_PER_TOKEN))
      extra = math.min(tonumber(ARGV[9 + i]), left(b))
      b.level = sub(b.level, mul(big(extra), UNITS_PER_TOKEN))
      b.current = b.level
    end
    extras[i] = extra
  end
  save()
  return {0, tenths, left(requests), left(tokens), extras[1], extras[2]}
end

if op == 'feedback' then
  -- Both buckets settle at the old stretch before the coefficient moves.
  if requests ~= nil then settle(requests) end
  if tokens ~= nil then settle(tokens) end
  local signal = ARGV[6]
  local successes = tonumber(fields.successes or '0')
  if signal ~= 's' and tonumber(signal) == 0 then
    -- A weightless signal (a transient fault) moves nothing.
  elseif signal ~= 's' then
    local weight = tonumber(signal)
    tenths = math.min(tenths + weight * 5, MAX_TENTHS)
    successes = 0
    redis.call('HSET', key, 'bp_s', tostring(now_s), 'bp_ns', tostring(now_ns))
  else
    local quiet = fields.bp_s == nil
      or since(tonumber(fields.bp_s), tonumber(fields.bp_ns)) >= QUIET_AFTER_S * NS_PER_S
    if quiet then
      tenths = math.max(tenths - 5, 0)
    else
      successes = successes + 1
      if successes % 3 == 0 then tenths = math.max(tenths - 2, 0) end
    end
  end
  redis.call('HSET', key, 'throttle', tostring(tenths), 'successes', tostring(successes))
  save()
  return {tenths}
end

if op == 'coefficient' then
  return {tenths}
end

return redis.error_reply('weir account script: unknown op ' .. tostring(op))
