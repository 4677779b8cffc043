-- include: time, chunk, dead, types, recovery, flow, groups
-- recover orphans (step 2): for each given consumer that is still expired, oldest first,
-- move its in-flight ids back to the active list, at most max_jobs in all, counting each
-- recovery in the recovered hash. A job recovered more than max_recoveries times in a row
-- goes to the dead set with the reason in its message, but only from a crash it was a
-- suspect in (lib/recovery.lua: it ran alone, so the crash was its own): a job that crashed
-- among others is queued again, as a suspect, and never charged for a neighbour. A consumer
-- whose set ran empty is dropped from the consumers set. Raises the signal if anything was
-- queued, and wakes a queue starved at its concurrency limit when a held count was lowered
-- with nothing queued (the room is back even if the jobs are not). A job cancelled while it was in flight (the cancelled set) is deleted, not
-- queued. The held hash is brought in line with each set it took from, so a crash never
-- keeps capacity of a concurrency limit.
-- KEYS[1] consumers   KEYS[2] active list   KEYS[3] data hash   KEYS[4] dead sorted set
-- KEYS[5] signal list   KEYS[6] recovered hash   KEYS[7] held hash   KEYS[8] cancelled sorted set
-- KEYS[9] flow settings hash   KEYS[10..16] the group keys (a grouped job goes back to the
-- front of its group's line, and its group's held count is lowered: lib/groups.lua; one
-- that becomes a suspect goes to the active list instead, where a suspect runs alone)
-- KEYS[17] unwritten set: the ids it sent to dead whose outcome (SPEC 16: a kept error, a
-- group marked failed) is still to be written; this script cannot read an envelope (no
-- MessagePack library in every server), so the caller writes them (dead_outcome.lua),
-- each taken off the set as it is written, and a caller that crashed first leaves them
-- for the next one
-- KEYS[18..] in-flight sets of expired consumers
-- ARGV[1] timeout in seconds   ARGV[2] max_jobs   ARGV[3] max_recoveries
-- ARGV[4] the calling consumer's own in-flight key (never recovered)
-- ARGV[5] dead_max_jobs   ARGV[6] dead_max_age in seconds
-- Returns {the number of jobs moved (to active or dead; missing messages are dropped and
-- counted), then up to UNWRITTEN_MAX ids of the unwritten set}.
local UNWRITTEN_MAX = 100
local now = server_now()
local cutoff = now - tonumber(ARGV[1])
local max_jobs = tonumber(ARGV[2])
local max_recoveries = tonumber(ARGV[3])

check_types({KEYS[2], 'list', KEYS[3], 'hash', KEYS[4], 'zset', KEYS[6], 'hash', KEYS[7], 'hash',
             KEYS[8], 'zset', KEYS[17], 'set'})
local G = group_keys(10)
check_types(group_types(G))

local moved, killed, released = 0, 0, false
local cancels = redis.call('EXISTS', KEYS[8]) == 1
for k = 18, #KEYS do
  if moved >= max_jobs then break end
  local key = KEYS[k]
  local score = redis.call('ZSCORE', KEYS[1], key)
  local kind = redis.call('TYPE', key).ok
  if kind ~= 'set' and kind ~= 'none' then
    -- Not a consumer's in-flight set: a registration with nothing to recover.
    redis.call('ZREM', KEYS[1], key)
  elseif key ~= ARGV[4] and score and tonumber(score) <= cutoff then
    local wanted = max_jobs - moved
    local ids = redis.call('SPOP', key, wanted)
    local groups = group_release(G, ids, KEYS[5])
    local group_of = {}
    for i = 1, #ids do group_of[ids[i]] = groups[i] end
    local queued = {}
    for _, id in ipairs(ids) do
      local message = redis.call('HGET', KEYS[3], id)
      if message and cancels and redis.call('ZREM', KEYS[8], id) == 1 then
        redis.call('HDEL', KEYS[3], id)
        redis.call('HDEL', KEYS[6], id)
      elseif message then
        local before = tonumber(redis.call('HGET', KEYS[6], id)) or 0
        local count = redis.call('HINCRBY', KEYS[6], id, 1)
        -- A suspect is isolated only from the active list (fetch.lua): it goes there,
        -- out of its group, to run alone; its group's capacity was given back above.
        if count >= SUSPECT then group_of[id] = nil end
        if count > max_recoveries and before >= SUSPECT then
          redis.call('ZADD', KEYS[4], now, id)
          redis.call('HSET', KEYS[3], id, with_error(message,
            'recovered ' .. max_recoveries .. ' times from crashed consumers; last from ' .. key))
          redis.call('HDEL', KEYS[6], id)
          redis.call('SADD', KEYS[17], id)
          killed = killed + 1
        else
          queued[#queued + 1] = id
        end
      end
    end
    local grouped = {}
    for i, id in ipairs(queued) do grouped[i] = group_of[id] or false end
    local lines, order = by_group(queued, grouped)
    for _, group in ipairs(order) do group_prepend(G, group, lines[group]) end
    local plain = {}
    for _, id in ipairs(queued) do
      if not group_of[id] then plain[#plain + 1] = id end
    end
    call_chunked('RPUSH', KEYS[2], plain)
    if #queued > 0 then raise_signal(KEYS[5]) end
    moved = moved + #ids
    if #ids < wanted then redis.call('ZREM', KEYS[1], key) end
    note_held(KEYS[7], key)
    released = true
  end
end
if released then wake_after_release(KEYS[9], KEYS[2], KEYS[5]) end
if killed > 0 then trim_dead(KEYS[4], KEYS[3], now, tonumber(ARGV[5]), tonumber(ARGV[6])) end
local reply = {moved}
if redis.call('EXISTS', KEYS[17]) == 1 then
  local unwritten = redis.call('SRANDMEMBER', KEYS[17], UNWRITTEN_MAX)
  for i = 1, #unwritten do reply[i + 1] = unwritten[i] end
end
return reply
