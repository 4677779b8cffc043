-- Library: a job's outcome (SPEC section 16), written in the same call that acknowledges
-- (ack_results.lua) or kills (kill.lua) it. Needs lib/flow.lua. curlyq never reads these
-- keys: Q:result:<id> (hash: "r" the record, MessagePack written by gq; "at" the server
-- time it ended), Q:results (sorted set id -> end time, the newest INDEX_MAX), Q:waiting
-- (sorted set name -> deadline of a caller of get() waiting for it: the outcome is
-- published on the queue's channel only for those).
-- An entry, read from ARGV at `at`: result key index in KEYS (0: nothing kept), ttl in ms,
-- record, number of follow-ups, then each follow-up:
--   "push"   k id message                    KEYS[k..k+3] data, active, signal, flow
--   "member" k field value keep_ms gid chan  KEYS[k..k+5] group, data, active, signal,
--                                            flow, waiting (of the group's queue)
--   "fail"   k member keep_ms gid chan       KEYS[k..k+1] group, waiting
local INDEX_MAX = 1000

-- The n keys from KEYS[k] on (an entry names them by their first index).
local function keys_from(k, n)
  local found = {}
  for i = 1, n do
    found[i] = KEYS[k]
    k = k + 1
  end
  return found
end

local function tell_waiters(waiting_key, channel, name)
  if redis.call('ZSCORE', waiting_key, name) then
    redis.call('ZREM', waiting_key, name)
    redis.call('PUBLISH', channel, name)
  end
end

-- The next job of a workflow: stored and queued unless its id exists (a deterministic id
-- and the same duplicate refusal as push.lua), so it is enqueued once.
local function push_follow_up(k, id, message)
  local data, active, signal, flow = unpack(keys_from(k, 4), 1, 4)
  if redis.call('HSETNX', data, id, message) == 1 then
    redis.call('RPUSH', active, id)
    raise_signal_unless_paused(flow, signal)
  end
end

-- A member of a group succeeded: its value under its field (once), the count of members
-- left lowered; at zero the callback stored at enqueue (if any) is queued.
local function member_done(k, field, value, keep_ms, gid, channel)
  local group = KEYS[k]
  local waiting = keys_from(k, 6)[6]
  if redis.call('HSETNX', group, field, value) == 0 then return end
  local left = redis.call('HINCRBY', group, 'left', -1)
  redis.call('PEXPIRE', group, keep_ms)
  if left > 0 then return end
  local cb_id = redis.call('HGET', group, 'cb_id')
  if cb_id then push_follow_up(k + 1, cb_id, redis.call('HGET', group, 'cb_msg')) end
  tell_waiters(waiting, channel, gid)
end

local function member_failed(k, member, keep_ms, gid, channel)
  local group, waiting = unpack(keys_from(k, 2), 1, 2)
  redis.call('HSETNX', group, 'failed', member)
  redis.call('PEXPIRE', group, keep_ms)
  tell_waiters(waiting, channel, gid)
end

-- Apply the entry at ARGV[at] for job `id`; returns the index after it.
local function apply_outcome(at, id, now, waiting_key, index_key, channel)
  local rk, ttl_ms, record, ops = tonumber(ARGV[at]), tonumber(ARGV[at + 1]), ARGV[at + 2],
    tonumber(ARGV[at + 3])
  at = at + 4
  if rk > 0 then
    local k = rk
    redis.call('HSET', KEYS[k], 'r', record, 'at', tostring(now))
    redis.call('PEXPIRE', KEYS[k], ttl_ms)
    redis.call('ZADD', index_key, now, id)
  end
  for _ = 1, ops do
    local kind, k = ARGV[at], tonumber(ARGV[at + 1])
    if kind == 'push' then  -- (each kind's size is fixed: ack_results.lua skips by it)
      push_follow_up(k, ARGV[at + 2], ARGV[at + 3])
      at = at + 4
    elseif kind == 'member' then
      member_done(k, ARGV[at + 2], ARGV[at + 3], tonumber(ARGV[at + 4]), ARGV[at + 5], ARGV[at + 6])
      at = at + 7
    else
      member_failed(k, ARGV[at + 2], tonumber(ARGV[at + 3]), ARGV[at + 4], ARGV[at + 5])
      at = at + 6
    end
  end
  if rk > 0 then tell_waiters(waiting_key, channel, id) end
  return at
end

local function trim_results(index_key)
  redis.call('ZREMRANGEBYRANK', index_key, 0, -(INDEX_MAX + 1))
end
