-- seed.lua: seed a drop's gate from the database's truth, unless it is already seeded.
--
-- KEYS[1]  drop:{id}:remaining  string: units the gate still admits in all sizes
-- KEYS[2]  drop:{id}:held       hash: user id -> units held by that buyer (live orders)
-- KEYS[3]  drop:{id}:idem       hash: "user|key" -> marker ("P|qty|lease[|sku]" in progress,
--                               "D|qty|order[|sku]" done)
-- KEYS[4]  drop:{id}:sizes      hash: sku -> units left in that size (a drop in sizes only)
-- ARGV[1]  remaining units in all sizes
-- ARGV[2]  expiry, unix seconds (the drop's closeAt plus a grace period)
-- ARGV[3]  restock channel (published to when this call seeds, so instances drop sold-out flags)
-- ARGV[4]  drop id (the message)
-- ARGV[5]  number of sizes m (0 for a drop without sizes), then m sku, units pairs
-- then     number of held entries n, then n user, units pairs
-- then     marker field, value pairs to the end
--
-- Returns 1 when it seeded, 0 when the drop was already seeded (nothing changed).
-- Both hashes always hold the field "_" so they exist, and keep their expiry, whatever is
-- added or removed later.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
redis.call('DEL', KEYS[2], KEYS[3], KEYS[4])
redis.call('SET', KEYS[1], ARGV[1])
redis.call('HSET', KEYS[2], '_', 0)
redis.call('HSET', KEYS[3], '_', 0)
local i = 6
for _ = 1, tonumber(ARGV[5]) do
  redis.call('HSET', KEYS[4], ARGV[i], ARGV[i + 1])
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
for k = 1, 4 do
  redis.call('EXPIREAT', KEYS[k], ARGV[2])
end
redis.call('PUBLISH', ARGV[3], ARGV[4])
return 1
