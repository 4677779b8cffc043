-- include: time, oom
-- register (heartbeat): set this consumer's score in the consumers set to the server's TIME.
-- KEYS[1] consumers sorted set
-- ARGV[1] this consumer's in-flight set key (its member in the consumers set)
-- Returns the server time written, as a string of unix seconds (for clock-skew reports).
pass_at_maxmemory('ZREM', KEYS[1])  -- runs at maxmemory too (lib/oom.lua)
local now = server_now()
redis.call('ZADD', KEYS[1], now, ARGV[1])
return tostring(now)
