-- include: chunk, types, flow
-- requeue own: put the given ids that this consumer still owns back at the head of the
-- active list, keeping their order, and raise the signal (fetched jobs that never started).
-- KEYS[1] in-flight set   KEYS[2] active list   KEYS[3] signal list   KEYS[4] held hash
-- ARGV    id1, id2, ... in queue order (at most 1000 per call)
-- Returns the number of ids put back.
check_types({KEYS[1], 'set', KEYS[2], 'list', KEYS[4], 'hash'})
local owned = {}
for i = #ARGV, 1, -1 do
  if redis.call('SREM', KEYS[1], ARGV[i]) == 1 then owned[#owned + 1] = ARGV[i] end
end
if #owned == 0 then return 0 end
-- LPUSH a b c leaves c b a, so pushing the ids last-first restores their order.
call_chunked('LPUSH', KEYS[2], owned)
note_held(KEYS[4], KEYS[1])
raise_signal(KEYS[3])
return #owned
