-- gcra.lua: one request against a token bucket (GCRA), as goods-domain's rate::gcra computes it.
-- Not a script of its own: the text before rate.lua and reserve.lua, which call gcra().
--
-- key       the bucket: its theoretical arrival time, in microseconds of Redis's clock
-- interval  microseconds for one token to come back
-- burst     tokens when full
--
-- Returns {allowed (1 or 0), tokens left, microseconds until one is allowed (0 when allowed),
-- microseconds until the bucket is full}. Only an allowed request changes the bucket, which
-- expires when it is full again (a missing bucket is a full one). Microseconds since 1970 are
-- about 1.8e15, within a Lua number's exact integers (2^53).
local function gcra(key, interval, burst)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local tolerance = interval * burst
  local tat = tonumber(redis.call('GET', key) or now)
  if tat < now then
    tat = now
  end
  local nxt = tat + interval
  local allowed_at = nxt - tolerance
  if now < allowed_at then
    return {0, 0, allowed_at - now, tat - now}
  end
  redis.call('SET', key, string.format('%d', nxt), 'PX', math.ceil((nxt - now) / 1000) + 1)
  return {1, math.floor((now + tolerance - nxt) / interval), 0, nxt - now}
end
