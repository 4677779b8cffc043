-- include: types
-- ack: for each id this consumer owns, remove it from its in-flight set and delete its
-- message and its recovery count.
-- KEYS[1] in-flight set   KEYS[2] data hash   KEYS[3] recovered hash
-- ARGV    id1, id2, ...  (at most 1000 per call)
-- Returns an array with one integer per id, in order: 1 acknowledged, 0 not owned.
check_types({KEYS[1], 'set', KEYS[2], 'hash', KEYS[3], 'hash'})
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
end
return results
