-- include: types, chunk, flow, groups, place
-- move in (operator: the copy half of a move across Cluster slots, gq move): store each
-- given job in this queue, in the state it had, unless its id is here already; the
-- caller then removes the copied jobs from their source (purge.lua). Run again after a
-- crash, a job copied before is found by its id and message and not written twice.
-- KEYS[1] active list   KEYS[2] scheduled sorted set   KEYS[3] dead sorted set
-- KEYS[4] data hash   KEYS[5] signal list   KEYS[6] cancelled sorted set
-- KEYS[7..13] the group keys
-- ARGV    per job: kind ("ready", "line", "scheduled", "dead"), id, message, score (the
--         due or death time; "" otherwise), group ("" for none); at most 1000 jobs
-- Returns an array with one integer per job, in order: 1 stored, 2 already here with the
-- same message, -1 another job holds the id here (nothing written).
local G = group_keys(7)
check_types({KEYS[1], 'list', KEYS[2], 'zset', KEYS[3], 'zset', KEYS[4], 'hash',
             KEYS[6], 'zset', unpack(group_types(G))})
local Q = new_place({active = KEYS[1], scheduled = KEYS[2], dead = KEYS[3], data = KEYS[4],
                     signal = KEYS[5], cancelled = KEYS[6]}, G)
local results = {}
for i = 1, #ARGV, 5 do
  local kind, id, message = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local stored = place_store(Q, id, message)
  if stored == 1 then place_put(Q, kind, id, tonumber(ARGV[i + 3]), ARGV[i + 4]) end
  results[#results + 1] = stored
end
place_done(Q)
return results
