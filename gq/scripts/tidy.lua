-- include: time, dead, types
-- tidy (custodian, every pass): trim the dead set by age and size even when nothing dies, and
-- drop recovery counts whose job no longer exists (curlyq's ack does not know the recovered
-- hash, so in a mixed fleet its entries would leak and a reused id would inherit an old
-- count). The recovered hash is walked with HSCAN, a bounded step per call.
-- KEYS[1] dead sorted set   KEYS[2] data hash   KEYS[3] recovered hash
-- ARGV[1] dead_max_jobs   ARGV[2] dead_max_age in seconds
-- ARGV[3] HSCAN cursor of the recovered hash ("0" starts a walk)   ARGV[4] HSCAN COUNT
-- Returns {next cursor ("0" when the walk is complete), dead jobs trimmed, counts dropped}.
check_types({KEYS[1], 'zset', KEYS[2], 'hash', KEYS[3], 'hash'})
local before = redis.call('ZCARD', KEYS[1])
trim_dead(KEYS[1], KEYS[2], server_now(), tonumber(ARGV[1]), tonumber(ARGV[2]))
local trimmed = before - redis.call('ZCARD', KEYS[1])
local page = redis.call('HSCAN', KEYS[3], ARGV[3], 'COUNT', tonumber(ARGV[4]))
local entries = page[2]
local dropped = 0
for i = 1, #entries, 2 do
  if redis.call('HEXISTS', KEYS[2], entries[i]) == 0 then
    redis.call('HDEL', KEYS[3], entries[i])
    dropped = dropped + 1
  end
end
return {page[1], trimmed, dropped}
