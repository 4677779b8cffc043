-- Library: putting jobs into a queue as a move brings them (issue 34: move.lua in one slot,
-- move_in.lua across slots). Needs lib/chunk.lua, lib/flow.lua and lib/groups.lua. A job
-- keeps its state: ready to the head of the active list (a scan reads the source newest
-- first, so each page pushed to the head leaves the moved jobs in their order, ahead of
-- the target's own: they have waited longest), waiting in a line to the end of
-- its group's line, scheduled at its due time (a grouped one noted in the later hash),
-- dead at its death time. Its id decides: the message is stored only if the id is new, so
-- a move run again after a crash never writes a job twice.

-- T: the target's keys {active, scheduled, dead, data, signal, cancelled}, G its group keys.
local function new_place(T, G)
  return {T = T, G = G, ready = {}, lines = {}, order = {}, placed = {}}
end

-- Store `message` under `id` unless the id is taken: 1 stored, 2 the same message was
-- there already (an earlier run's copy), -1 another job holds the id (nothing written).
local function place_store(Q, id, message)
  if redis.call('HSETNX', Q.T.data, id, message) == 1 then return 1 end
  if redis.call('HGET', Q.T.data, id) == message then return 2 end
  return -1
end

-- Put a stored job where its kind says (ready and line jobs at place_done).
local function place_put(Q, kind, id, score, group)
  Q.placed[#Q.placed + 1] = id
  if kind == 'ready' then
    Q.ready[#Q.ready + 1] = id
  elseif kind == 'line' then
    if not Q.lines[group] then Q.lines[group] = {}; Q.order[#Q.order + 1] = group end
    local line = Q.lines[group]
    line[#line + 1] = id
  elseif kind == 'scheduled' then
    redis.call('ZADD', Q.T.scheduled, score, id)
    if group and group ~= '' then redis.call('HSET', Q.G.later, id, group) end
  else
    redis.call('ZADD', Q.T.dead, score, id)
  end
end

local function place_done(Q)
  call_chunked('LPUSH', Q.T.active, Q.ready)
  for _, group in ipairs(Q.order) do group_append(Q.G, group, Q.lines[group]) end
  forget_cancels(Q.T.cancelled, Q.placed)
  if #Q.ready + #Q.order > 0 then raise_signal(Q.T.signal) end
end
