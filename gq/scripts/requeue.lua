-- include: chunk, types, flow, groups
-- requeue own: put the given ids that this consumer still owns back at the head of the
-- active list, keeping their order, and raise the signal (fetched jobs that never started).
-- KEYS[1] in-flight set   KEYS[2] active list   KEYS[3] signal list   KEYS[4] held hash
-- KEYS[5..11] the group keys: a grouped job goes back to the front of its group's line
-- ARGV    id1, id2, ... in queue order (at most 1000 per call)
-- Returns the number of ids put back.
local G = group_keys(5)
check_types({KEYS[1], 'set', KEYS[2], 'list', KEYS[4], 'hash', unpack(group_types(G))})
local owned = {}
for i = #ARGV, 1, -1 do
  if redis.call('SREM', KEYS[1], ARGV[i]) == 1 then owned[#owned + 1] = ARGV[i] end
end
if #owned == 0 then return 0 end
-- owned is last-first; the groups' lines want first-last.
local in_order = {}
for i = #owned, 1, -1 do in_order[#in_order + 1] = owned[i] end
local groups = group_release(G, in_order, KEYS[3])
local lines, order = by_group(in_order, groups)
for _, group in ipairs(order) do group_prepend(G, group, lines[group]) end
local ungrouped = {}
for i = 1, #owned do
  if not groups[#owned - i + 1] then ungrouped[#ungrouped + 1] = owned[i] end
end
-- LPUSH a b c leaves c b a, so pushing the ids last-first restores their order.
call_chunked('LPUSH', KEYS[2], ungrouped)
note_held(KEYS[4], KEYS[1])
raise_signal(KEYS[3])
return #owned
