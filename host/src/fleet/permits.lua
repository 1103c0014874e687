-- One model's concurrency permits, shared by a fleet of gateways: each held
-- permit is a lease (a member of the sorted set, scored by its expiry in ms on
-- Redis's clock). A gateway may take several in one run (a block it hands to
-- its calls in memory); it renews its leases while it holds them; the leases
-- of a gateway that died expire, and their permits come back.
--
-- KEYS[1]  the permits' sorted set
-- ARGV     op, lease ttl (ms), then the op's arguments:
--   acquire   open permits, lease ids... -> how many were taken: the first n
--             ids, as many as are open (0: all open permits are held)
--   release   lease ids...               -> 0
--   renew     lease ids...               -> the ids no longer held (expired)
--   held                                 -> permits held now

local time = redis.call('TIME')
local now_ms = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local key, op, ttl = KEYS[1], ARGV[1], tonumber(ARGV[2])

redis.call('ZREMRANGEBYSCORE', key, '-inf', now_ms)

if op == 'acquire' then
  local free = tonumber(ARGV[3]) - redis.call('ZCARD', key)
  local taken = math.min(math.max(free, 0), #ARGV - 3)
  for i = 4, 3 + taken do
    redis.call('ZADD', key, now_ms + ttl, ARGV[i])
  end
  if taken > 0 then redis.call('PEXPIRE', key, ttl * 2) end
  return taken
end

if op == 'release' then
  for i = 3, #ARGV do
    redis.call('ZREM', key, ARGV[i])
  end
  return 0
end

if op == 'renew' then
  local lost = {}
  for i = 3, #ARGV do
    if redis.call('ZSCORE', key, ARGV[i]) then
      redis.call('ZADD', key, now_ms + ttl, ARGV[i])
    else
      lost[#lost + 1] = ARGV[i]
    end
  end
  redis.call('PEXPIRE', key, ttl * 2)
  return lost
end

if op == 'held' then
  return redis.call('ZCARD', key)
end

return redis.error_reply('weir permits script: unknown op ' .. tostring(op))
