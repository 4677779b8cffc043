-- include: chunk, types, flow
-- retry dead (operator): move each given id that is in the dead set to the tail of the
-- active list, optionally with a new message (attempts reset), and raise the signal. A
-- cancel request left for the id (kill.lua drops them, curlyq's does not) is dropped.
-- A dead id whose message is missing has nothing to run: it is dropped from the dead set.
-- KEYS[1] dead sorted set   KEYS[2] data hash   KEYS[3] active list   KEYS[4] signal list
-- KEYS[5] cancelled sorted set
-- ARGV    id1, message1, id2, message2, ...  ("" keeps the stored message; at most 1000 pairs)
-- Returns an array with one integer per id, in order: 1 queued, 0 not in the dead set or
-- without a message.
check_types({KEYS[1], 'zset', KEYS[2], 'hash', KEYS[3], 'list'})
local results = {}
local queued = {}
for i = 1, #ARGV, 2 do
  local id = ARGV[i]
  results[#results + 1] = 0
  if redis.call('ZREM', KEYS[1], id) == 1 and redis.call('HEXISTS', KEYS[2], id) == 1 then
    if ARGV[i + 1] ~= '' then redis.call('HSET', KEYS[2], id, ARGV[i + 1]) end
    queued[#queued + 1] = id
    results[#results] = 1
  end
end
if #queued > 0 then
  call_chunked('RPUSH', KEYS[3], queued)
  forget_cancels(KEYS[5], queued)
  raise_signal(KEYS[4])
end
return results
