-- confirm.lua: mark reservations done with their orders, so retries replay the orders. A
-- drop's committer confirms a whole batch in one call.
--
-- KEYS[1]  drop:{id}:idem
-- ARGV     one quadruple per reservation:
--   ARGV[4i-3]  marker field "user|key"
--   ARGV[4i-2]  units
--   ARGV[4i-1]  order id
--   ARGV[4i]    size ('' for a drop without sizes)
--
-- Returns how many markers it wrote. Writes each marker ("D|qty|order[|sku]") whatever was
-- there (a purchase the database committed while the gate was unreachable is confirmed too),
-- but only into a seeded gate: an absent hash stays absent, so nothing is created without an
-- expiry.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
local written = 0
for i = 1, #ARGV - 3, 4 do
  local marker = 'D|' .. ARGV[i + 1] .. '|' .. ARGV[i + 2]
  if ARGV[i + 3] ~= '' then
    marker = marker .. '|' .. ARGV[i + 3]
  end
  redis.call('HSET', KEYS[1], ARGV[i], marker)
  written = written + 1
end
return written
