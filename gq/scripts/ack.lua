-- include: time, chunk, types, flow, history, ack, groups, events
-- ack: for each id this consumer owns, remove it from its in-flight set and delete its
-- message, its recovery count and any cancel request (lib/ack.lua); under a concurrency
-- limit, wake the consumers waiting for room (lib/flow.lua).
-- KEYS[1] in-flight set   KEYS[2] data hash   KEYS[3] recovered hash   KEYS[4] held hash
-- KEYS[5] flow settings hash   KEYS[6] active list   KEYS[7] signal list
-- KEYS[8] cancelled sorted set   KEYS[9..15] the group keys (a grouped job's release lowers
-- its group's held count: lib/groups.lua)
-- KEYS[#KEYS - 1], KEYS[#KEYS] the flow settings hash, the events stream (lib/events.lua)
-- ARGV    id1, id2, ...  (at most 1000 per call)
-- Returns an array with one integer per id, in order: 1 acknowledged, 0 not owned.
local G = group_keys(9)
check_types({KEYS[1], 'set', KEYS[2], 'hash', KEYS[3], 'hash', KEYS[4], 'hash', G.of, 'hash',
             G.state, 'hash'})
events_acked(KEYS[1], KEYS[2], '', ARGV, 1)
history_open()  -- the two KEYS before the events' two (optional): lib/history.lua
local flags, owned = acknowledge(KEYS[1], KEYS[2], KEYS[3], KEYS[8], ARGV)
if owned > 0 then
  note_held(KEYS[4], KEYS[1])
  wake_after_release(KEYS[5], KEYS[6], KEYS[7])
  local owned_ids = {}
  for i = 1, #ARGV do
    if flags[i] == 1 then owned_ids[#owned_ids + 1] = ARGV[i] end
  end
  group_release(G, owned_ids, KEYS[7])
end
return flags
