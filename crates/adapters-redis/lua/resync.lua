-- resync.lua: rebuild a drop's gate from the database's truth, atomically, keeping what is in
-- flight. Seeds the gate when it holds nothing.
--
-- KEYS[1]  drop:{id}:remaining  string: units the gate still admits in all sizes
-- KEYS[2]  drop:{id}:held       hash: user id -> units held by that buyer
-- KEYS[3]  drop:{id}:idem       hash: "user|key" -> marker
-- KEYS[4]  drop:{id}:sizes      hash: sku -> units left in that size (a drop in sizes only)
-- ARGV[1]  remaining units in all sizes per the database (limited - units in live orders)
-- ARGV[2]  expiry, unix seconds
-- ARGV[3]  restock channel
-- ARGV[4]  drop id (the message)
-- ARGV[5]  number of sizes m (0 for a drop without sizes), then m sku, units pairs
-- then     number of held entries n, then n user, units pairs (live orders)
-- then     marker field, value pairs to the end: a done marker for every order of the drop
--
-- A marker already in the gate that the seed does not list is kept and keeps its units taken
-- (from its own size): an in-progress marker is a purchase in flight; a done marker the seed
-- lacks is an order that committed after the seed was read. So a seed read before some commits
-- can only hold units back (positive drift, healed by the next pass), never admit more than
-- exist. Done markers that no order explains (read before the seed, absent from it) are deleted
-- by the caller just before this script (GateSeed::unexplained), so they are not in `old` here.
--
-- Returns the units the gate admits after the rebuild, in all sizes.
local old = redis.call('HGETALL', KEYS[3])
redis.call('DEL', KEYS[2], KEYS[3], KEYS[4])
redis.call('HSET', KEYS[2], '_', 0)
redis.call('HSET', KEYS[3], '_', 0)
local remaining = tonumber(ARGV[1])
local sizes = {}
local i = 6
local m = tonumber(ARGV[5])
for _ = 1, m do
  sizes[ARGV[i]] = tonumber(ARGV[i + 1])
  i = i + 2
end
local n = tonumber(ARGV[i])
i = i + 1
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
    local sku = string.match(marker, '^%a|%d+|%d+|([%w%._%-]+)$')
    local user = string.match(field, '^(%d+)|')
    if qty and user then
      redis.call('HSET', KEYS[3], field, marker)
      redis.call('HINCRBY', KEYS[2], user, qty)
      if sku and sizes[sku] then
        sizes[sku] = sizes[sku] - qty
      end
      remaining = remaining - qty
    end
  end
end
if m > 0 then
  -- In sizes, the drop's units are its sizes' units: each size is floored at 0 on its own.
  remaining = 0
  for sku, units in pairs(sizes) do
    if units < 0 then
      units = 0
    end
    redis.call('HSET', KEYS[4], sku, units)
    remaining = remaining + units
  end
end
if remaining < 0 then
  remaining = 0
end
redis.call('SET', KEYS[1], remaining)
for k = 1, 4 do
  redis.call('EXPIREAT', KEYS[k], ARGV[2])
end
redis.call('PUBLISH', ARGV[3], ARGV[4])
return remaining
