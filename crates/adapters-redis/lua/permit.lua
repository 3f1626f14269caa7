-- permit.lua: takes one of the fleet's database write permits (the global write budget).
--
-- KEYS[1]  {db}:permits       sorted set: holder -> lease end (ms, Redis's clock)
-- KEYS[2]  {db}:permits:peak  the most permits ever held at once
-- ARGV[1]  the budget (permits in all)
-- ARGV[2]  this holder's id (unique per attempt)
-- ARGV[3]  the lease in ms: a holder that died gives its permit back when it ends
--
-- Returns the permits held now (this one included) when taken, or -1 when all are held.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local held = redis.call('ZCARD', KEYS[1])
if held >= tonumber(ARGV[1]) then
  return -1
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[2])
held = held + 1
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[3]) * 2)
local peak = tonumber(redis.call('GET', KEYS[2]) or '0')
if held > peak then
  redis.call('SET', KEYS[2], held)
end
return held
