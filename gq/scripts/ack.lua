-- include: chunk, types, flow
-- ack: for each id this consumer owns, remove it from its in-flight set and delete its
-- message, its recovery count and any cancel request; under a concurrency limit, wake the
-- consumers waiting for room (lib/flow.lua).
-- KEYS[1] in-flight set   KEYS[2] data hash   KEYS[3] recovered hash   KEYS[4] held hash
-- KEYS[5] flow settings hash   KEYS[6] active list   KEYS[7] signal list
-- KEYS[8] cancelled sorted set
-- ARGV    id1, id2, ...  (at most 1000 per call)
-- Returns an array with one integer per id, in order: 1 acknowledged, 0 not owned.
check_types({KEYS[1], 'set', KEYS[2], 'hash', KEYS[3], 'hash', KEYS[4], 'hash'})
local results = {}
local owned = {}
for i = 1, #ARGV do
  if redis.call('SREM', KEYS[1], ARGV[i]) == 1 then
    owned[#owned + 1] = ARGV[i]
    results[i] = 1
  else
    results[i] = 0
  end
end
-- One HDEL per hash for the whole batch (at most 1000 ids, well below unpack's limit).
if #owned > 0 then
  redis.call('HDEL', KEYS[2], unpack(owned, 1, #owned))
  redis.call('HDEL', KEYS[3], unpack(owned, 1, #owned))
  if redis.call('EXISTS', KEYS[8]) == 1 then
    redis.call('ZREM', KEYS[8], unpack(owned, 1, #owned))
  end
  note_held(KEYS[4], KEYS[1])
  wake_after_release(KEYS[5], KEYS[6], KEYS[7])
end
return results
