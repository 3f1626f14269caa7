-- confirm.lua: mark reservations done with their orders, so retries replay the orders. A
-- drop's committer confirms a whole batch in one call.
--
-- KEYS[1]  drop:{id}:idem
-- ARGV     one triple per reservation:
--   ARGV[3i-2]  marker field "user|key"
--   ARGV[3i-1]  units
--   ARGV[3i]    order id
--
-- Returns how many markers it wrote. Writes each marker whatever was there (a purchase the
-- database committed while the gate was unreachable is confirmed too), but only into a seeded
-- gate: an absent hash stays absent, so nothing is created without an expiry.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
local written = 0
for i = 1, #ARGV - 2, 3 do
  redis.call('HSET', KEYS[1], ARGV[i], 'D|' .. ARGV[i + 1] .. '|' .. ARGV[i + 2])
  written = written + 1
end
return written
