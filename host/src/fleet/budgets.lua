-- Budget holds and settled spend shared by a fleet of gateways: one hash per
-- scope and period (fields st/su settled tokens/USD, ht/hu held tokens/USD),
-- with host/src/budget/book.rs's whole-or-nothing hold.
--
-- KEYS     the accounts, one per (scope, period) the call is held against
-- ARGV     op, then per op:
--   hold      tokens, usd, then per check: account index, kind (t|u), limit, expire-at (unix s)
--             -> {0} | {the first check that does not fit (from 1), what it has left}
--   hold-seeded  as hold, but an account that does not exist (a new period, or a Redis that
--             lost its data) is not taken as empty: -> {-1, each missing account's index}
--             and nothing changes; the gateway seeds them from the fleet's ledger and asks again
--   seed      (one account) settled tokens, settled usd, expire-at -> {} (an account that
--             exists already is left as it is: every gateway may seed it at once)
--   settle    held tokens, held usd, spent tokens, spent usd -> {}
--   release   held tokens, held usd                          -> {}
--   status                                                   -> per account {st, su, ht, hu}
-- USD amounts travel and are stored as '%.17g' text: a double read back is the
-- double written, so the sums are the in-process f64 sums.

local op = ARGV[1]

local function read(key)
  local v = redis.call('HMGET', key, 'st', 'su', 'ht', 'hu')
  return tonumber(v[1] or '0'), tonumber(v[2] or '0'), tonumber(v[3] or '0'), tonumber(v[4] or '0')
end

local function usd(x) return string.format('%.17g', x) end

if op == 'hold-seeded' then
  local missing = {}
  for index, key in ipairs(KEYS) do
    if redis.call('EXISTS', key) == 0 then missing[#missing + 1] = index end
  end
  if #missing > 0 then
    table.insert(missing, 1, -1)
    return missing
  end
  op = 'hold'
end

if op == 'hold' then
  local tokens, dollars = tonumber(ARGV[2]), tonumber(ARGV[3])
  local i = 4
  while i <= #ARGV do
    local key = KEYS[tonumber(ARGV[i])]
    local kind, limit = ARGV[i + 1], tonumber(ARGV[i + 2])
    local st, su, ht, hu = read(key)
    if kind == 't' then
      local left = math.max(limit - (st + ht), 0)
      if tokens > left then return {(i - 4) / 4 + 1, tostring(left)} end
    else
      local left = math.max(limit - (su + hu), 0)
      if dollars > left then return {(i - 4) / 4 + 1, usd(left)} end
    end
    i = i + 4
  end
  i = 4
  while i <= #ARGV do
    local key = KEYS[tonumber(ARGV[i])]
    redis.call('EXPIREAT', key, ARGV[i + 3])
    i = i + 4
  end
  for _, key in ipairs(KEYS) do
    local _, _, ht, hu = read(key)
    redis.call('HSET', key, 'ht', tostring(ht + tokens), 'hu', usd(hu + dollars))
  end
  return {0}
end

if op == 'settle' or op == 'release' then
  local tokens, dollars = tonumber(ARGV[2]), tonumber(ARGV[3])
  for _, key in ipairs(KEYS) do
    if redis.call('EXISTS', key) == 1 then
      local st, su, ht, hu = read(key)
      local fields = {'ht', tostring(math.max(ht - tokens, 0)), 'hu', usd(math.max(hu - dollars, 0))}
      if op == 'settle' then
        fields[5], fields[6] = 'st', tostring(st + tonumber(ARGV[4]))
        fields[7], fields[8] = 'su', usd(su + tonumber(ARGV[5]))
      end
      redis.call('HSET', key, unpack(fields))
    end
  end
  return {}
end

if op == 'seed' then
  if redis.call('EXISTS', KEYS[1]) == 0 then
    redis.call('HSET', KEYS[1], 'st', ARGV[2], 'su', ARGV[3], 'ht', '0', 'hu', '0')
    redis.call('EXPIREAT', KEYS[1], ARGV[4])
  end
  return {}
end

if op == 'status' then
  local out = {}
  for _, key in ipairs(KEYS) do
    local st, su, ht, hu = read(key)
    out[#out + 1] = {tostring(st), usd(su), tostring(ht), usd(hu)}
  end
  return out
end

return redis.error_reply('weir budgets script: unknown op ' .. tostring(op))
