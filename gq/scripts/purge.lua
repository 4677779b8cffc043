-- include: types, chunk, flow, groups, pick
-- purge (operator: gq purge, the removal half of a move across slots, Queue.purge): remove
-- each given job that is still where a scan found it (lib/pick.lua: ready, line, scheduled,
-- dead) with its bookkeeping: its message, recovery count, cancel request, a scheduled
-- grouped job's note, and its uniqueness lock when the lock still names it. The id is free.
-- KEYS[1] active list   KEYS[2] scheduled sorted set   KEYS[3] dead sorted set
-- KEYS[4] data hash   KEYS[5] recovered hash   KEYS[6] cancelled sorted set
-- KEYS[7..13] the group keys   KEYS[14..] uniqueness locks (string: the holder's id)
-- ARGV[1] the ready window's offset from the tail   ARGV[2] its length
-- ARGV    then per job: kind ("ready", "line", "scheduled", "dead"), id, the lines field
--         ("" unless a line), the index in KEYS of its lock (0 for none); at most 1000 jobs
-- Returns an array with one integer per job, in order: 1 removed, 0 not found there.
local G = group_keys(7)
check_types({KEYS[1], 'list', KEYS[2], 'zset', KEYS[3], 'zset', KEYS[4], 'hash',
             KEYS[5], 'hash', KEYS[6], 'zset', unpack(group_types(G))})
local P = new_pick(KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), 3, 4)
local sets = {scheduled = KEYS[2], dead = KEYS[3]}
local results, gone = {}, {}
for i = 3, #ARGV, 4 do
  local kind, id, field, k = ARGV[i], ARGV[i + 1], ARGV[i + 2], tonumber(ARGV[i + 3])
  results[#results + 1] = 0
  if pick_find(P, G, sets[kind], kind, id, field) then
    pick_take(P, G, sets[kind], kind, id, field)
    if k > 0 and redis.call('GET', KEYS[k]) == id then redis.call('DEL', KEYS[k]) end
    gone[#gone + 1] = id
    results[#results] = 1
  end
end
pick_done(P, G)
if #gone > 0 then
  call_chunked('HDEL', KEYS[4], gone)
  call_chunked('HDEL', KEYS[5], gone)
  forget_cancels(KEYS[6], gone)
end
return results
