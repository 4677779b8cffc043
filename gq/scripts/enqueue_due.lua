-- include: time, chunk, oom, types, flow, groups
-- enqueue due: move up to n ids whose time has come (by the server's TIME) from the
-- scheduled set to the tail of the active list, oldest first; raise the signal if any moved
-- (unless the queue is paused).
-- KEYS[1] scheduled sorted set   KEYS[2] active list   KEYS[3] signal list
-- KEYS[4] flow settings hash
-- KEYS[5..11] the group keys: a grouped job joins the end of its group's line instead
-- ARGV[1] n, the most ids to move (scheduler_max_jobs)
-- Returns the number of ids moved.
local G = group_keys(5)
check_types({KEYS[1], 'zset', KEYS[2], 'list', unpack(group_types(G))})
pass_at_maxmemory('ZREM', KEYS[1])  -- runs at maxmemory too (lib/oom.lua)
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', server_now(), 'LIMIT', 0, tonumber(ARGV[1]))
if #ids == 0 then return 0 end
call_chunked('RPUSH', KEYS[2], group_due(G, ids))
call_chunked('ZREM', KEYS[1], ids)
raise_signal_unless_paused(KEYS[4], KEYS[3])
return #ids
