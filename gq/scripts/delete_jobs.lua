-- include: types
-- delete jobs (operator): delete each given id that is in the given sorted set (dead or
-- scheduled) with its message and its recovery count, which frees the id for a new job.
-- An id that is not in that set is left alone, wherever else it is.
-- KEYS[1] dead or scheduled sorted set   KEYS[2] data hash   KEYS[3] recovered hash
-- ARGV    id1, id2, ...  (at most 1000 per call)
-- Returns an array with one integer per id, in order: 1 deleted, 0 not in that set.
check_types({KEYS[1], 'zset', KEYS[2], 'hash', KEYS[3], 'hash'})
local results = {}
for i = 1, #ARGV do
  if redis.call('ZREM', KEYS[1], ARGV[i]) == 1 then
    redis.call('HDEL', KEYS[2], ARGV[i])
    redis.call('HDEL', KEYS[3], ARGV[i])
    results[i] = 1
  else
    results[i] = 0
  end
end
return results
