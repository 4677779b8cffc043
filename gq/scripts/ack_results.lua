-- include: time, chunk, types, flow, history, ack, groups, outcome, events
-- ack_results: ack.lua for jobs with an outcome to keep or a workflow to continue (SPEC
-- section 16): for each id this consumer owns, acknowledge it as ack.lua does and, in
-- the same call, write its result and its follow-ups (lib/outcome.lua). An id no longer
-- owned gets neither: its new owner will write them, so a follow-up is enqueued once.
-- (The acker sends this when no fetch carries the acks: fetch.lua does the same work.)
-- KEYS[1] in-flight set   KEYS[2] data hash   KEYS[3] recovered hash   KEYS[4] held hash
-- KEYS[5] flow settings hash   KEYS[6] active list   KEYS[7] signal list
-- KEYS[8] cancelled sorted set   KEYS[9] waiting sorted set   KEYS[10] results index list
-- KEYS[11..17] the group keys (a grouped job's release lowers its group's held count:
-- lib/groups.lua)   KEYS[18] result slots registry   KEYS[19..] the slot of each TTL of
-- the blob, then each entry's follow-ups' keys in turn
-- KEYS[#KEYS - 1], KEYS[#KEYS] the flow settings hash, the events stream (lib/events.lua)
-- ARGV[1] the queue's channel   ARGV[2] the entries blob (lib/outcome.lua's fields_of:
-- the number of ids n, at most 1000, the n ids, the kinds, the TTLs, then one entry per
-- id, in order)
-- Returns an array with one integer per id, in order: 1 acknowledged, 0 not owned.
local G = group_keys(11)
check_types({KEYS[1], 'set', KEYS[2], 'hash', KEYS[3], 'hash', KEYS[4], 'hash',
             KEYS[9], 'zset', KEYS[10], 'list', G.of, 'hash', G.state, 'hash'})
events_acked(KEYS[1], KEYS[2], ARGV[2], ARGV, 3)

history_open()  -- the two KEYS before the events' two (optional): lib/history.lua
local flags, owned = ack_outcomes(ARGV[2], 19, {KEYS[1], KEYS[2], KEYS[3], KEYS[8], KEYS[9],
                                                KEYS[10], KEYS[18]}, ARGV[1])
if #owned > 0 then
  note_held(KEYS[4], KEYS[1])
  wake_after_release(KEYS[5], KEYS[6], KEYS[7])
  group_release(G, owned, KEYS[7])
end
return flags
