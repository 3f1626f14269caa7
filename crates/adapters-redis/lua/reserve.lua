-- reserve.lua (after gcra.lua): the admission decisions of one or more reservations of a drop,
-- atomically and in order, each as if it ran alone: the buyer's token bucket when given, then
-- the idempotency marker, then units left in the size asked for, then the buyer's limit across
-- sizes; only if all pass are the units taken. A later reservation sees what an earlier one took.
-- Replies in the API contract's order of checks (SOLD_OUT before PER_USER_LIMIT_EXCEEDED);
-- both checks come before any write.
--
-- KEYS[1]  drop:{id}:remaining  units the gate still admits in all sizes
-- KEYS[2]  drop:{id}:held
-- KEYS[3]  drop:{id}:idem
-- KEYS[4]  drop:{id}:sizes      hash: sku -> units left (a drop in sizes only)
-- KEYS[5..] rate:buyer:{user}   the buckets of the reservations that charge one here (a Redis
--                                that is not a cluster: a bucket is in another slot than the drop)
-- ARGV, nine a reservation:
--   +1 user id
--   +2 marker field "user|key"
--   +3 units asked for
--   +4 per-user limit
--   +5 the attempt's lease end, unix milliseconds
--   +6 the size asked for ('' for a drop without sizes)
--   +7 the index in KEYS of the buyer's bucket, 0 for none
--   +8 the bucket's interval, microseconds (0 for none)
--   +9 the bucket's burst (0 for none)
--
-- Returns one reply a reservation, in their order, each one of:
--   {'ADMITTED', remaining after}      units taken, marker "P|qty|lease end[|sku]" set
--   {'REPLAY', order id}               done marker with the same size and units
--   {'IN_PROGRESS', lease end}         in-progress marker with the same size and units (0: a
--                                      marker written before leases existed, long expired)
--   {'KEY_REUSED'}                     marker with another size or other units
--   {'SOLD_OUT', remaining}            fewer units left in the size than asked for
--   {'PER_USER_LIMIT'}                 the buyer would exceed the limit
--   {'NOT_SEEDED'}                     the gate holds nothing for this drop
--   {'RATE_LIMITED', gcra()'s answer} the bucket refused it: nothing else checked or taken
local function reserve(user, field, qty_arg, limit, lease, sku, bucket, interval, burst)
  if bucket > 0 then
    local charged = gcra(KEYS[bucket], interval, burst)
    if charged[1] == 0 then
      return {'RATE_LIMITED', charged[1], charged[2], charged[3], charged[4]}
    end
  end
  local marker = redis.call('HGET', KEYS[3], field)
  if marker then
    local state, qty, last, of = string.match(marker, '^(%a)|(%d+)|?(%d*)|?([%w%._%-]*)$')
    if qty ~= qty_arg or of ~= sku then
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
  local qty = tonumber(qty_arg)
  if remaining < qty then
    return {'SOLD_OUT', remaining}
  end
  local held = tonumber(redis.call('HGET', KEYS[2], user) or '0')
  if held + qty > tonumber(limit) then
    return {'PER_USER_LIMIT'}
  end
  redis.call('DECRBY', KEYS[1], qty)
  local suffix = ''
  if sku ~= '' then
    redis.call('HINCRBY', KEYS[4], sku, -qty)
    suffix = '|' .. sku
  end
  redis.call('HINCRBY', KEYS[2], user, qty)
  redis.call('HSET', KEYS[3], field, 'P|' .. qty_arg .. '|' .. lease .. suffix)
  return {'ADMITTED', remaining - qty}
end

local replies = {}
for i = 1, #ARGV, 9 do
  replies[#replies + 1] = reserve(ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4],
    ARGV[i + 5], tonumber(ARGV[i + 6]), tonumber(ARGV[i + 7]), tonumber(ARGV[i + 8]))
end
return replies
