-- remaining.lua: units the gate still admits for a drop.
--
-- KEYS[1]  drop:{id}:remaining
--
-- Returns the units, or -1 when the gate does not hold the drop.
local left = redis.call('GET', KEYS[1])
if not left then
  return -1
end
return tonumber(left)
