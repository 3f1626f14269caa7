-- rate.lua (after gcra.lua): one request against a token bucket.
--
-- KEYS[1]  the bucket
-- ARGV[1]  the interval: microseconds for one token to come back
-- ARGV[2]  the burst: tokens when full
--
-- Returns gcra()'s answer.
return gcra(KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]))
