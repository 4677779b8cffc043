-- include: time, types
-- reschedule (operator: gq scheduled reschedule, Queue.reschedule): give each given job
-- that is still scheduled a new due time; an id no longer scheduled is left alone. The
-- earliest new time is announced to the schedulers (lib/time.lua, announce_due).
-- KEYS[1] scheduled sorted set
-- ARGV[1] "at" (ARGV[2] is unix seconds) or "after" (ARGV[2] is a delay added to the
--         server's TIME)   ARGV[3..] id1, id2, ... (at most 1000)
-- Returns an array with one integer per id, in order: 1 rescheduled, 0 not scheduled.
check_types({KEYS[1], 'zset'})
local at = tonumber(ARGV[2])
if ARGV[1] == 'after' then at = at + server_now() end
local results, any = {}, false
for i = 3, #ARGV do
  results[#results + 1] = 0
  if redis.call('ZSCORE', KEYS[1], ARGV[i]) then
    redis.call('ZADD', KEYS[1], 'XX', at, ARGV[i])
    results[#results], any = 1, true
  end
end
if any then announce_due(KEYS[1], at) end
return results
