-- reserve.lua: the admission decision, atomically: idempotency marker, then units left, then
-- the buyer's limit; only if all pass are the units taken. Replies in the API contract's order
-- of checks (SOLD_OUT before PER_USER_LIMIT_EXCEEDED); both checks come before any write.
--
-- KEYS[1]  drop:{id}:remaining
-- KEYS[2]  drop:{id}:held
-- KEYS[3]  drop:{id}:idem
-- ARGV[1]  user id
-- ARGV[2]  marker field "user|key"
-- ARGV[3]  units asked for
-- ARGV[4]  per-user limit
-- ARGV[5]  the attempt's lease end, unix milliseconds
--
-- Returns one of:
--   {'ADMITTED', remaining after}      units taken, marker "P|qty|lease end" set
--   {'REPLAY', order id}               done marker with the same units
--   {'IN_PROGRESS', lease end}         in-progress marker with the same units (0: a marker
--                                      written before leases existed, long expired)
--   {'KEY_REUSED'}                     marker with other units
--   {'SOLD_OUT', remaining}            fewer units left than asked for
--   {'PER_USER_LIMIT'}                 the buyer would exceed the limit
--   {'NOT_SEEDED'}                     the gate holds nothing for this drop
local marker = redis.call('HGET', KEYS[3], ARGV[2])
if marker then
  local state, qty, last = string.match(marker, '^(%a)|(%d+)|?(%d*)$')
  if qty ~= ARGV[3] then
    return {'KEY_REUSED'}
  end
  if state == 'D' then
    return {'REPLAY', tonumber(last)}
  end
  return {'IN_PROGRESS', tonumber(last) or 0}
end
local remaining = redis.call('GET', KEYS[1])
if not remaining then
  return {'NOT_SEEDED'}
end
remaining = tonumber(remaining)
local qty = tonumber(ARGV[3])
if remaining < qty then
  return {'SOLD_OUT', remaining}
end
local held = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0')
if held + qty > tonumber(ARGV[4]) then
  return {'PER_USER_LIMIT'}
end
redis.call('DECRBY', KEYS[1], qty)
redis.call('HINCRBY', KEYS[2], ARGV[1], qty)
redis.call('HSET', KEYS[3], ARGV[2], 'P|' .. ARGV[3] .. '|' .. ARGV[5])
return {'ADMITTED', remaining - qty}
