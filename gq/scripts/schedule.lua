-- include: time, types, chunk, flow, events
-- schedule: store each job whose id is new and add it to the scheduled set at its time,
-- dropping any cancel request left for its id by an earlier job.
-- KEYS[1] data hash   KEYS[2] scheduled sorted set   KEYS[3] cancelled sorted set
-- KEYS[#KEYS - 1], KEYS[#KEYS] the flow settings hash, the events stream (lib/events.lua)
-- ARGV[1] "at" (times are unix seconds) or "after" (times are delays added to the server's TIME)
-- ARGV    then id1, message1, time1, id2, message2, time2, ...  (at most 1000 triples)
-- Publishes the earliest new due time on KEYS[2] .. ':due' (lib/time.lua, announce_due):
-- the consumers' schedulers wake for it instead of waiting for their next poll.
-- Returns an array with one integer per job, in order: 1 stored and scheduled, 0 the id exists.
check_types({KEYS[1], 'hash', KEYS[2], 'zset'})
local offset = 0
if ARGV[1] == 'after' then offset = server_now() end
local results = {}
local stored = {}
local earliest = nil
for i = 2, #ARGV, 3 do
  if redis.call('HSETNX', KEYS[1], ARGV[i], ARGV[i + 1]) == 1 then
    local at = offset + tonumber(ARGV[i + 2])
    redis.call('ZADD', KEYS[2], at, ARGV[i])
    if earliest == nil or at < earliest then earliest = at end
    stored[#stored + 1] = ARGV[i]
    results[#results + 1] = 1
  else
    results[#results + 1] = 0
  end
end
events_stored('enqueued', results, ARGV, 2, 3)
forget_cancels(KEYS[3], stored)
announce_due(KEYS[2], earliest)
return results
