-- include: time, types, chunk, flow, events
-- push_unique: store and queue (or schedule) each job of a task with unique_for, unless
-- the job holding its uniqueness lock has not finished yet.
-- KEYS[1] data hash   KEYS[2] active list   KEYS[3] signal list   KEYS[4] flow settings hash
-- KEYS[5] scheduled sorted set   KEYS[6] dead sorted set
-- KEYS[7..] the uniqueness lock of each job, in the order of the jobs (a string holding
--           the id of the job that took it, with a TTL of unique_for)
-- KEYS[#KEYS - 1], KEYS[#KEYS] the flow settings hash, the events stream (lib/events.lua)
-- ARGV[1] "now" (queue at once), "at" (times are unix seconds) or "after" (delays added
--         to the server's TIME); then per job: id, message, time, lock TTL in ms
--         (at most 1000 jobs per call)
-- Returns an array with one entry per job, in order: 1 stored, 0 its id exists, or the id
-- (a string) of the unfinished job that holds the lock (nothing stored).
-- A job holding a lock has not finished while its id is in the data hash and not in the
-- dead set: an acknowledged job left the data hash, a dead one is in the dead set, so a
-- lock outlives its job only as a stale name, which the next call takes over. A lock
-- whose job id a crash left half-written cannot block anything past its TTL.
check_types({KEYS[1], 'hash', KEYS[2], 'list', KEYS[5], 'zset', KEYS[6], 'zset'})
local mode = ARGV[1]
local offset = 0
if mode == 'after' then offset = server_now() end
local earliest = nil  -- announced to the schedulers (lib/time.lua)
local results = {}
local queued = {}
for i = 2, #ARGV, 4 do
  local k = 6 + (i + 2) / 4
  local id = ARGV[i]
  local holder = redis.call('GET', KEYS[k])
  if holder and redis.call('HEXISTS', KEYS[1], holder) == 1
      and not redis.call('ZSCORE', KEYS[6], holder) then
    results[#results + 1] = holder
  elseif redis.call('HSETNX', KEYS[1], id, ARGV[i + 1]) == 1 then
    redis.call('SET', KEYS[k], id, 'PX', ARGV[i + 3])
    if mode == 'now' then
      queued[#queued + 1] = id
    else
      local at = offset + tonumber(ARGV[i + 2])
      redis.call('ZADD', KEYS[5], at, id)
      if earliest == nil or at < earliest then earliest = at end
    end
    results[#results + 1] = 1
  else
    results[#results + 1] = 0
  end
end
events_stored('enqueued', results, ARGV, 2, 4)
if #queued > 0 then
  call_chunked('RPUSH', KEYS[2], queued)
  raise_signal_unless_paused(KEYS[4], KEYS[3])
end
announce_due(KEYS[5], earliest)
return results
