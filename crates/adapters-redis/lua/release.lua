-- release.lua: give back the units of a cancelled order to its size (the caller calls it once
-- per cancelled order). Its done marker stays, so a retry of the original request still
-- replays.
--
-- KEYS[1]  drop:{id}:remaining
-- KEYS[2]  drop:{id}:held
-- KEYS[3]  drop:{id}:sizes
-- ARGV[1]  user id
-- ARGV[2]  units
-- ARGV[3]  restock channel
-- ARGV[4]  drop id (the message)
-- ARGV[5]  the order's size ('' for a drop without sizes)
--
-- Returns the units now left in all sizes, or -1 when the gate does not hold the drop (it will
-- be seeded from the database, which already counts the cancellation).
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
local left = redis.call('INCRBY', KEYS[1], ARGV[2])
if ARGV[5] ~= '' then
  redis.call('HINCRBY', KEYS[3], ARGV[5], ARGV[2])
end
local held = tonumber(redis.call('HINCRBY', KEYS[2], ARGV[1], -tonumber(ARGV[2])))
if held <= 0 then
  redis.call('HDEL', KEYS[2], ARGV[1])
end
redis.call('PUBLISH', ARGV[3], ARGV[4])
return left
