-- include: types, chunk, flow, groups, pick, place
-- move (operator: gq move, Queue.move, both queues in one Cluster slot): move each given
-- job that is still where a scan found it (lib/pick.lua) to the target queue, in the same
-- state (lib/place.lua), atomically: it is in one queue or the other, never both, never
-- neither. Its recovery count and cancel request stay behind (dropped); a uniqueness lock
-- stays a stale name in the source (push_unique takes such a lock over).
-- KEYS[1] active list   KEYS[2] scheduled sorted set   KEYS[3] dead sorted set
-- KEYS[4] data hash   KEYS[5] recovered hash   KEYS[6] cancelled sorted set
-- KEYS[7..13] the group keys                            (all of the source queue)
-- KEYS[14] active list   KEYS[15] scheduled sorted set   KEYS[16] dead sorted set
-- KEYS[17] data hash   KEYS[18] signal list   KEYS[19] cancelled sorted set
-- KEYS[20..26] the group keys                           (all of the target queue)
-- ARGV[1] the ready window's offset from the tail   ARGV[2] its length
-- ARGV    then per job: kind ("ready", "line", "scheduled", "dead"), id, the lines field
--         ("" unless a line); at most 1000 jobs
-- Returns an array with one integer per job, in order: 1 moved, 0 not found there (or
-- without a message), -1 another job holds the id in the target (left where it was).
local S, TG = group_keys(7), group_keys(20)
check_types({KEYS[1], 'list', KEYS[2], 'zset', KEYS[3], 'zset', KEYS[4], 'hash', KEYS[5], 'hash',
             KEYS[6], 'zset', KEYS[14], 'list', KEYS[15], 'zset', KEYS[16], 'zset',
             KEYS[17], 'hash', KEYS[19], 'zset'})
check_types(group_types(S))
check_types(group_types(TG))
local P = new_pick(KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), 3, 3)
local Q = new_place({active = KEYS[14], scheduled = KEYS[15], dead = KEYS[16], data = KEYS[17],
                     signal = KEYS[18], cancelled = KEYS[19]}, TG)
local sets = {scheduled = KEYS[2], dead = KEYS[3]}
local results, gone = {}, {}
for i = 3, #ARGV, 3 do
  local kind, id, field = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local message = redis.call('HGET', KEYS[4], id)
  local found, score = false, nil
  if message then found, score = pick_find(P, S, sets[kind], kind, id, field) end
  local outcome = 0
  if found then
    local group = kind == 'line' and string.match(field, '^(.*)\n[^\n]*$')
      or (kind == 'scheduled' and redis.call('HGET', S.later, id)) or ''
    outcome = place_store(Q, id, message)
    if outcome > 0 then
      pick_take(P, S, sets[kind], kind, id, field)
      if outcome == 1 then place_put(Q, kind, id, tonumber(score), group) end
      gone[#gone + 1] = id
      outcome = 1
    end
  end
  results[#results + 1] = outcome
end
pick_done(P, S)
place_done(Q)
if #gone > 0 then
  call_chunked('HDEL', KEYS[4], gone)
  call_chunked('HDEL', KEYS[5], gone)
  forget_cancels(KEYS[6], gone)
end
return results
