-- resync.lua: rebuild a drop's gate from the database's truth, atomically, keeping what is in
-- flight. Seeds the gate when it holds nothing.
--
-- KEYS[1]  drop:{id}:remaining  string: units the gate still admits
-- KEYS[2]  drop:{id}:held       hash: user id -> units held by that buyer
-- KEYS[3]  drop:{id}:idem       hash: "user|key" -> marker
-- ARGV[1]  remaining units per the database (limitedQuantity - units in live orders)
-- ARGV[2]  expiry, unix seconds
-- ARGV[3]  restock channel
-- ARGV[4]  drop id (the message)
-- ARGV[5]  number of held entries n, then ARGV[6 .. 5+2n] user, units pairs (live orders)
-- then     marker field, value pairs to the end: a done marker for every order of the drop
--
-- A marker already in the gate that the seed does not list is kept and keeps its units taken:
-- an in-progress marker is a purchase in flight; a done marker the seed lacks is an order that
-- committed after the seed was read. So a seed read before some commits can only hold units
-- back (positive drift, healed by the next pass), never admit more than exist. Done markers
-- that no order explains (read before the seed, absent from it) are deleted by the caller just
-- before this script (GateSeed::unexplained), so they are not in `old` here.
--
-- Returns the units the gate admits after the rebuild.
local old = redis.call('HGETALL', KEYS[3])
redis.call('DEL', KEYS[2], KEYS[3])
redis.call('HSET', KEYS[2], '_', 0)
redis.call('HSET', KEYS[3], '_', 0)
local remaining = tonumber(ARGV[1])
local n = tonumber(ARGV[5])
local i = 6
for _ = 1, n do
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
  i = i + 2
end
while i < #ARGV do
  redis.call('HSET', KEYS[3], ARGV[i], ARGV[i + 1])
  i = i + 2
end
for j = 1, #old, 2 do
  local field, marker = old[j], old[j + 1]
  if field ~= '_' and redis.call('HEXISTS', KEYS[3], field) == 0 then
    local qty = tonumber(string.match(marker, '^%a|(%d+)'))
    local user = string.match(field, '^(%d+)|')
    if qty and user then
      redis.call('HSET', KEYS[3], field, marker)
      redis.call('HINCRBY', KEYS[2], user, qty)
      remaining = remaining - qty
    end
  end
end
if remaining < 0 then
  remaining = 0
end
redis.call('SET', KEYS[1], remaining)
for k = 1, 3 do
  redis.call('EXPIREAT', KEYS[k], ARGV[2])
end
redis.call('PUBLISH', ARGV[3], ARGV[4])
return remaining
