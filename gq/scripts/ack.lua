-- include: chunk, types, flow, ack
-- ack: for each id this consumer owns, remove it from its in-flight set and delete its
-- message, its recovery count and any cancel request (lib/ack.lua); under a concurrency
-- limit, wake the consumers waiting for room (lib/flow.lua).
-- KEYS[1] in-flight set   KEYS[2] data hash   KEYS[3] recovered hash   KEYS[4] held hash
-- KEYS[5] flow settings hash   KEYS[6] active list   KEYS[7] signal list
-- KEYS[8] cancelled sorted set
-- ARGV    id1, id2, ...  (at most 1000 per call)
-- Returns an array with one integer per id, in order: 1 acknowledged, 0 not owned.
check_types({KEYS[1], 'set', KEYS[2], 'hash', KEYS[3], 'hash', KEYS[4], 'hash'})
local flags, owned = acknowledge(KEYS[1], KEYS[2], KEYS[3], KEYS[8], ARGV)
if owned > 0 then
  note_held(KEYS[4], KEYS[1])
  wake_after_release(KEYS[5], KEYS[6], KEYS[7])
end
return flags
