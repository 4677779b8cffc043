-- include: time, types, chunk, flow, history, groups, events
-- cancel: remove each given job that is ready (in the active list) or scheduled, freeing
-- its id; a job that exists but is neither (in flight with some consumer) gets a cancel
-- request in the cancelled set, which its consumer reads and acts on (it interrupts the
-- handler with JobCancelled and acknowledges the job). Dead jobs and unknown ids are left
-- alone. LREM walks the active list: cost grows with its length, once per id.
-- KEYS[1] active list   KEYS[2] scheduled sorted set   KEYS[3] dead sorted set
-- KEYS[4] data hash   KEYS[5] recovered hash   KEYS[6] cancelled sorted set
-- KEYS[7..13] the group keys: a removed scheduled grouped job's note in the later hash goes
-- with it (it would otherwise wait there for tidy)
-- KEYS[#KEYS - 1], KEYS[#KEYS] the flow settings hash, the events stream (lib/events.lua)
-- ARGV    id1, id2, ... (at most 1000 per call); requests are scored with the server time
-- Returns one string per id, in order: "removed", "requested" (in flight) or "" (not found,
-- or dead).
local G = group_keys(7)
check_types({KEYS[1], 'list', KEYS[2], 'zset', KEYS[3], 'zset', KEYS[4], 'hash', KEYS[5], 'hash',
             KEYS[6], 'zset', unpack(group_types(G))})
history_open()  -- the two KEYS before the events' two (optional): lib/history.lua
local now = server_now()
local results = {}
for i = 1, #ARGV do
  local id = ARGV[i]
  local outcome = ''
  if redis.call('HEXISTS', KEYS[4], id) == 1 and not redis.call('ZSCORE', KEYS[3], id) then
    if redis.call('ZREM', KEYS[2], id) == 1 or redis.call('LREM', KEYS[1], 1, id) == 1 then
      event_one('cancelled', id, '', KEYS[4])

      history_record('c', {id}, KEYS[4])
      redis.call('HDEL', KEYS[4], id)
      redis.call('HDEL', G.later, id)
      redis.call('HDEL', KEYS[5], id)
      outcome = 'removed'
    else
      redis.call('ZADD', KEYS[6], now, id)
      outcome = 'requested'
    end
  end
  results[i] = outcome
end
return results
