-- seed.lua: seed a drop's gate from the database's truth, unless it is already seeded.
--
-- KEYS[1]  drop:{id}:remaining  string: units the gate still admits
-- KEYS[2]  drop:{id}:held       hash: user id -> units held by that buyer (live orders)
-- KEYS[3]  drop:{id}:idem       hash: "user|key" -> marker ("P|qty" in progress, "D|qty|order" done)
-- ARGV[1]  remaining units
-- ARGV[2]  expiry, unix seconds (the drop's closeAt plus a grace period)
-- ARGV[3]  restock channel (published to when this call seeds, so instances drop sold-out flags)
-- ARGV[4]  drop id (the message)
-- ARGV[5]  number of held entries n, then ARGV[6 .. 5+2n] user, units pairs
-- then     marker field, value pairs to the end
--
-- Returns 1 when it seeded, 0 when the drop was already seeded (nothing changed).
-- Both hashes always hold the field "_" so they exist, and keep their expiry, whatever is
-- added or removed later.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
redis.call('DEL', KEYS[2], KEYS[3])
redis.call('SET', KEYS[1], ARGV[1])
redis.call('HSET', KEYS[2], '_', 0)
redis.call('HSET', KEYS[3], '_', 0)
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
for k = 1, 3 do
  redis.call('EXPIREAT', KEYS[k], ARGV[2])
end
redis.call('PUBLISH', ARGV[3], ARGV[4])
return 1
