-- One model's concurrency permits, shared by a fleet of gateways: each held
-- permit is a lease (a member of the sorted set, scored by its expiry in ms on
-- Redis's clock). A gateway renews its leases while their calls run; the leases
-- of a gateway that died expire, and their permits come back.
--
-- KEYS[1]  the permits' sorted set
-- ARGV     op, lease ttl (ms), then the op's arguments:
--   acquire   lease id, open permits  -> 1 (held) | 0 (all open permits are held)
--   release   lease id                -> 0
--   renew     lease ids...            -> how many were still held
--   held                              -> permits held now

local time = redis.call('TIME')
local now_ms = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local key, op, ttl = KEYS[1], ARGV[1], tonumber(ARGV[2])

redis.call('ZREMRANGEBYSCORE', key, '-inf', now_ms)

if op == 'acquire' then
  if redis.call('ZCARD', key) >= tonumber(ARGV[4]) then return 0 end
  redis.call('ZADD', key, now_ms + ttl, ARGV[3])
  redis.call('PEXPIRE', key, ttl * 2)
  return 1
end

if op == 'release' then
  redis.call('ZREM', key, ARGV[3])
  return 0
end

if op == 'renew' then
  local renewed = 0
  for i = 3, #ARGV do
    renewed = renewed + redis.call('ZADD', key, 'XX', 'CH', now_ms + ttl, ARGV[i])
  end
  redis.call('PEXPIRE', key, ttl * 2)
  return renewed
end

if op == 'held' then
  return redis.call('ZCARD', key)
end

return redis.error_reply('weir permits script: unknown op ' .. tostring(op))
