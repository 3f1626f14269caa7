-- reserve.lua (after gcra.lua): the admission decision, atomically: the buyer's token bucket when
-- given, then idempotency marker, then units left in the size asked for, then the buyer's limit
-- across sizes; only if all pass are the units taken.
-- Replies in the API contract's order of checks (SOLD_OUT before PER_USER_LIMIT_EXCEEDED);
-- both checks come before any write.
--
-- KEYS[1]  drop:{id}:remaining  units the gate still admits in all sizes
-- KEYS[2]  drop:{id}:held
-- KEYS[3]  drop:{id}:idem
-- KEYS[4]  drop:{id}:sizes      hash: sku -> units left (a drop in sizes only)
-- KEYS[5]  rate:buyer:{user}     the buyer's token bucket, when charged here (a Redis that is
--                                not a cluster: the bucket is in another slot than the drop)
-- ARGV[1]  user id
-- ARGV[2]  marker field "user|key"
-- ARGV[3]  units asked for
-- ARGV[4]  per-user limit
-- ARGV[5]  the attempt's lease end, unix milliseconds
-- ARGV[6]  the size asked for ('' for a drop without sizes)
-- ARGV[7]  with KEYS[5]: the bucket's interval, microseconds
-- ARGV[8]  with KEYS[5]: the bucket's burst
--
-- Returns one of:
--   {'ADMITTED', remaining after}      units taken, marker "P|qty|lease end[|sku]" set
--   {'REPLAY', order id}               done marker with the same size and units
--   {'IN_PROGRESS', lease end}         in-progress marker with the same size and units (0: a
--                                      marker written before leases existed, long expired)
--   {'KEY_REUSED'}                     marker with another size or other units
--   {'SOLD_OUT', remaining}            fewer units left in the size than asked for
--   {'PER_USER_LIMIT'}                 the buyer would exceed the limit
--   {'NOT_SEEDED'}                     the gate holds nothing for this drop
--   {'RATE_LIMITED', gcra()'s answer} the bucket refused it: nothing else checked or taken
if KEYS[5] then
  local bucket = gcra(KEYS[5], tonumber(ARGV[7]), tonumber(ARGV[8]))
  if bucket[1] == 0 then
    return {'RATE_LIMITED', bucket[1], bucket[2], bucket[3], bucket[4]}
  end
end
local sku = ARGV[6]
local marker = redis.call('HGET', KEYS[3], ARGV[2])
if marker then
  local state, qty, last, of = string.match(marker, '^(%a)|(%d+)|?(%d*)|?([%w%._%-]*)$')
  if qty ~= ARGV[3] or of ~= sku then
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
if sku ~= '' then
  -- A size the drop does not sell has nothing left.
  remaining = tonumber(redis.call('HGET', KEYS[4], sku) or '0')
end
local qty = tonumber(ARGV[3])
if remaining < qty then
  return {'SOLD_OUT', remaining}
end
local held = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0')
if held + qty > tonumber(ARGV[4]) then
  return {'PER_USER_LIMIT'}
end
redis.call('DECRBY', KEYS[1], qty)
local suffix = ''
if sku ~= '' then
  redis.call('HINCRBY', KEYS[4], sku, -qty)
  suffix = '|' .. sku
end
redis.call('HINCRBY', KEYS[2], ARGV[1], qty)
redis.call('HSET', KEYS[3], ARGV[2], 'P|' .. ARGV[3] .. '|' .. ARGV[5] .. suffix)
return {'ADMITTED', remaining - qty}
