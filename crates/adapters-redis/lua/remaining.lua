-- remaining.lua: units the gate still admits for a drop, in all and per size.
--
-- KEYS[1]  drop:{id}:remaining
-- KEYS[2]  drop:{id}:sizes
--
-- Returns {units in all, sku, units, sku, units, ...} (no sizes for a drop without them), or
-- {-1} when the gate does not hold the drop.
local left = redis.call('GET', KEYS[1])
if not left then
  return {-1}
end
local reply = {tonumber(left)}
local sizes = redis.call('HGETALL', KEYS[2])
for i = 1, #sizes, 2 do
  reply[#reply + 1] = sizes[i]
  reply[#reply + 1] = tonumber(sizes[i + 1])
end
return reply
