-- include: time, dead, chunk, types, flow, history, ack, groups, outcome, events
-- kill: if this consumer owns the job, move it to the dead set (scored now), store its
-- updated message, then trim the dead set to its bounds. A cancel request for the job is
-- dropped: it was for this life, which is over (a dead job is beyond cancel).
-- KEYS[1] in-flight set   KEYS[2] dead sorted set   KEYS[3] data hash   KEYS[4] recovered hash
-- KEYS[5] held hash   KEYS[6] flow settings hash   KEYS[7] active list   KEYS[8] signal list
-- KEYS[9] cancelled sorted set
-- KEYS[10..16] the group keys (a grouped job's release lowers its group's held count; from
-- dead it is queued again without its group)
-- KEYS[#KEYS - 1], KEYS[#KEYS] the flow settings hash, the events stream (lib/events.lua)
-- ARGV[1] id   ARGV[2] updated message, or "" to keep the stored one (undecodable messages)
-- ARGV[3] dead_max_jobs   ARGV[4] dead_max_age in seconds
-- With an outcome to keep (SPEC section 16): KEYS[17] waiting sorted set   KEYS[18] results
-- index   KEYS[19] result slots registry   KEYS[20..] the slot of the entry's TTL (when it
-- keeps one), then the follow-ups' keys; ARGV[5] the queue's channel
-- ARGV[6..] the entry (lib/outcome.lua): the error kept past the dead set's trim, and a
-- group member's failure marked on its group, in this same call.
-- Returns 1 if killed, 0 if this consumer does not own the job (nothing changed).
local G = group_keys(10)
check_types({KEYS[1], 'set', KEYS[2], 'zset', KEYS[3], 'hash', KEYS[4], 'hash', KEYS[5], 'hash',
             G.of, 'hash', G.state, 'hash'})
local keeps_ttl = #ARGV >= 6 and ARGV[6] ~= '0' and ARGV[6]
if #ARGV >= 6 then check_types({KEYS[17], 'zset', KEYS[18], 'list', KEYS[19], 'zset'}) end
if keeps_ttl then check_types({KEYS[20], 'hash'}) end
history_open()  -- the two KEYS before the events' two (optional): lib/history.lua
if redis.call('SREM', KEYS[1], ARGV[1]) == 0 then return 0 end
event_one('dead', ARGV[1], ARGV[2], KEYS[3])
local now = server_now()
redis.call('ZADD', KEYS[2], now, ARGV[1])
if ARGV[2] ~= '' then redis.call('HSET', KEYS[3], ARGV[1], ARGV[2]) end
redis.call('HDEL', KEYS[4], ARGV[1])
forget_cancels(KEYS[9], {ARGV[1]})
history_record('x', {ARGV[1]}, KEYS[3])  -- (its message as stored just above)
if #ARGV >= 6 then
  write_killed_outcome(6, 20, keeps_ttl, ARGV[1], ARGV[5], now, {KEYS[17], KEYS[18], KEYS[19]})
end
trim_dead(KEYS[2], KEYS[3], now, tonumber(ARGV[3]), tonumber(ARGV[4]))
note_held(KEYS[5], KEYS[1])
wake_after_release(KEYS[6], KEYS[7], KEYS[8])
group_release(G, {ARGV[1]}, KEYS[8])
return 1
