-- include: time, chunk, types, flow, groups, events
-- retry: if this consumer owns the job, move it to the scheduled set at server TIME + delay
-- and store its updated message (attempt + 1). A job whose cancel was asked while it ran
-- is deleted instead, its id freed (the cancel wins over the retry, as in recover.lua).
-- KEYS[1] in-flight set   KEYS[2] scheduled sorted set   KEYS[3] data hash
-- KEYS[4] recovered hash   KEYS[5] held hash   KEYS[6] flow settings hash
-- KEYS[7] active list   KEYS[8] signal list   KEYS[9] cancelled sorted set
-- KEYS[10..16] the group keys: a grouped job's release lowers its group's held count and
-- the job goes back into its group's line when due (lib/groups.lua)
-- KEYS[#KEYS - 1], KEYS[#KEYS] the flow settings hash, the events stream (lib/events.lua)
-- ARGV[1] id   ARGV[2] updated message   ARGV[3] delay in seconds
-- ARGV[4] (optional) seconds during which the whole queue fetches nothing: the handler
-- raised RateLimited, which charges no attempt (the caller sends the message unchanged);
-- at most MAX_HOLD (lib/flow.lua), a longer or non-finite one is cut to it
-- ARGV[5] (optional) "group": the hold is for the job's group only (RateLimited(group=True));
-- for an ungrouped job it holds the queue
-- ARGV[6] (optional) the job's group as its envelope says ("" for none): where it waits
-- when due, also when it was not counted (its group had no concurrency limit)
-- Returns 1 if retried, 2 if deleted for its cancel request, 0 if this consumer does not
-- own the job (nothing changed).
check_types({KEYS[1], 'set', KEYS[2], 'zset', KEYS[3], 'hash', KEYS[4], 'hash',
             KEYS[5], 'hash', KEYS[6], 'hash', KEYS[9], 'zset'})
local G = group_keys(10)
check_types({G.of, 'hash', G.later, 'hash', G.state, 'hash', G.parked, 'zset'})
if redis.call('SREM', KEYS[1], ARGV[1]) == 0 then return 0 end
local now = server_now()
local cancelled = redis.call('ZREM', KEYS[9], ARGV[1]) == 1
if cancelled then
  redis.call('HDEL', KEYS[3], ARGV[1])
else
  redis.call('ZADD', KEYS[2], now + tonumber(ARGV[3]), ARGV[1])
  redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
end
redis.call('HDEL', KEYS[4], ARGV[1])
note_held(KEYS[5], KEYS[1])
local group = group_release(G, {ARGV[1]}, KEYS[8])[1]
if not group and ARGV[6] and ARGV[6] ~= '' then group = ARGV[6] end
if group and not cancelled then redis.call('HSET', G.later, ARGV[1], group) end
local hold = clamp_hold(tonumber(ARGV[4] or '0'))
if hold > 0 and group and ARGV[5] == 'group' then
  group_hold(G, group, hold, now * 1000)
  wake_after_release(KEYS[6], KEYS[7], KEYS[8])
elseif hold > 0 then
  -- Extend a hold already there, never shorten it (one out of range counts as the cap).
  local now_ms = now * 1000
  if hold * 1000 > hold_wait(redis.call('HGET', KEYS[6], 'hold_until'), now_ms) then
    redis.call('HSET', KEYS[6], 'hold_until', math.floor(now_ms + hold * 1000))
  end
else
  wake_after_release(KEYS[6], KEYS[7], KEYS[8])
end
event_one(cancelled and 'cancelled' or 'retried', ARGV[1], ARGV[2], nil, {'delay', ARGV[3]})
if cancelled then return 2 end
return 1
