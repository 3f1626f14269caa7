-- cancel.lua: give back an admitted reservation that did not become an order: its units (to
-- its size), the buyer's count and its marker. Only an in-progress marker holds units, and
-- removing it is what makes a second cancel change nothing. Only the attempt that wrote the
-- marker (same size, units and lease end) is cancelled: a late settle of an old attempt leaves
-- a newer one alone.
--
-- KEYS[1]  drop:{id}:remaining
-- KEYS[2]  drop:{id}:held
-- KEYS[3]  drop:{id}:idem
-- KEYS[4]  drop:{id}:sizes
-- ARGV[1]  user id
-- ARGV[2]  marker field "user|key"
-- ARGV[3]  restock channel
-- ARGV[4]  drop id (the message)
-- ARGV[5]  the attempt's marker, "P|qty|lease end[|sku]"
--
-- Returns 1 when units were given back, 0 when there was nothing to give back.
local marker = redis.call('HGET', KEYS[3], ARGV[2])
if not marker then
  return 0
end
-- A marker written before leases existed ("P|qty") is the attempt with lease end 0.
if marker ~= ARGV[5] and marker .. '|0' ~= ARGV[5] then
  return 0
end
local qty = string.match(marker, '^P|(%d+)')
local sku = string.match(marker, '^P|%d+|%d+|([%w%._%-]+)$')
redis.call('HDEL', KEYS[3], ARGV[2])
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('INCRBY', KEYS[1], qty)
  if sku then
    redis.call('HINCRBY', KEYS[4], sku, qty)
  end
  local held = tonumber(redis.call('HINCRBY', KEYS[2], ARGV[1], -tonumber(qty)))
  if held <= 0 then
    redis.call('HDEL', KEYS[2], ARGV[1])
  end
  redis.call('PUBLISH', ARGV[3], ARGV[4])
end
return 1
