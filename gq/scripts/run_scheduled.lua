-- include: chunk, types, flow, groups
-- run scheduled (operator: "run now", the dashboard's): move each given id that is in the
-- scheduled set to the tail of the active list, or, for a grouped job (the groups' later
-- hash names its group), to the end of its group's line, so that it keeps its group's
-- limits and turns; raise the signal. A cancel request left for the id is dropped. A
-- scheduled id whose message is missing has nothing to run: it is dropped from the set.
-- KEYS[1] scheduled sorted set   KEYS[2] data hash   KEYS[3] active list   KEYS[4] signal list
-- KEYS[5] cancelled sorted set   KEYS[6..12] the group keys
-- ARGV    id1, id2, ... (at most 1000 per call)
-- Returns an array with one integer per id, in order: 1 moved, 0 not in the scheduled set
-- or without a message.
local G = group_keys(6)
check_types({KEYS[1], 'zset', KEYS[2], 'hash', KEYS[3], 'list', KEYS[5], 'zset',
             unpack(group_types(G))})
local results, moved, gone = {}, {}, {}
for i = 1, #ARGV do
  local id = ARGV[i]
  results[i] = 0
  if redis.call('ZREM', KEYS[1], id) == 1 then
    if redis.call('HEXISTS', KEYS[2], id) == 1 then
      moved[#moved + 1] = id
      results[i] = 1
    else
      gone[#gone + 1] = id
    end
  end
end
if #gone > 0 then call_chunked('HDEL', G.later, gone) end
if #moved > 0 then
  call_chunked('RPUSH', KEYS[3], group_due(G, moved))
  forget_cancels(KEYS[5], moved)
  raise_signal(KEYS[4])
end
return results
