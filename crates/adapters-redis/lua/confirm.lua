-- confirm.lua: mark a reservation done with its order, so retries replay the order.
--
-- KEYS[1]  drop:{id}:idem
-- ARGV[1]  marker field "user|key"
-- ARGV[2]  units
-- ARGV[3]  order id
--
-- Returns 1. Writes the marker whatever was there (a purchase the database committed while the
-- gate was unreachable is confirmed too), but only into a seeded gate: an absent hash stays
-- absent, so nothing is created without an expiry.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], 'D|' .. ARGV[2] .. '|' .. ARGV[3])
return 1
