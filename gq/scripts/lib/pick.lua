-- Library: taking chosen jobs out of a queue by where a scan found them (issue 34: purge,
-- move; gq/store/scan.py reads, these scripts change). Needs lib/chunk.lua and
-- lib/groups.lua. Where a job is, by kind:
--   ready      in the active list, inside the window a scan read: `off` entries from the
--              tail, `len` long (a scan reads from the tail, so workers taking from the
--              head shift nothing; pushes since the read move it toward the head, which
--              PICK_SLACK covers). Taken by LSET to a mark and one LREM of the marks from
--              the tail: no walk of the whole list per id (an LREM per id would be one).
--   line       in its group's line, at the field of the lines hash that held it
--              ("group\nN"): the field is set to "" (fetch drops an entry without a
--              message, as it does a cancelled one) and the line's head advanced past such
--              entries; a line left empty leaves the ring.
--   scheduled  in the scheduled set (a grouped one's note in the groups' later hash goes)
--   dead       in the dead set

-- Entries beyond the window read (toward the head) in which a ready job is still looked for.
local PICK_SLACK = 500
-- The most entries of a line's head one call advances past (each is one HGET).
local PICK_TRIM = 1000
local PICK_MARK = '\0gq-picked\0'

-- id -> its index counted from the tail (negative), for the `wanted` ids found in the
-- window (none for a page of another state: its length is 0).
local function window_positions(active, off, len, wanted)
  if len == 0 or next(wanted) == nil then return {} end
  local llen = redis.call('LLEN', active)
  local start = math.max(0, llen - off - len - PICK_SLACK)
  local stop = llen - off - 1
  local at = {}
  if stop < start then return at end
  local items = redis.call('LRANGE', active, start, stop)
  for i = #items, 1, -1 do
    local id = items[i]
    if wanted[id] and at[id] == nil then at[id] = start + i - 1 - llen end
  end
  return at
end

-- The ids of ARGV's jobs of kind "ready" (ARGV from `first`, `step` values per job: kind,
-- then id).
local function wanted_ready(first, step)
  local wanted = {}
  for i = first, #ARGV, step do
    if ARGV[i] == 'ready' then wanted[ARGV[i + 1]] = true end
  end
  return wanted
end

-- A pick: where the wanted ready jobs are in the window, the marked entries, the lines
-- touched. `first` and `step`: where ARGV's jobs start and how many values each has.
local function new_pick(active, off, len, first, step)
  local at = window_positions(active, off, len, wanted_ready(first, step))
  return {active = active, at = at, marks = {}, lines = {}}
end

-- Whether job `id` is where `kind` and `field` say (see above), without taking it; the
-- score for a scheduled or dead job.
local function pick_find(P, G, set, kind, id, field)
  if kind == 'ready' then return P.at[id] ~= nil end
  if kind == 'line' then return redis.call('HGET', G.lines, field) == id end
  local score = redis.call('ZSCORE', set, id)
  return score and true or false, score
end

-- Take job `id` found by pick_find; list entries go at pick_done.
local function pick_take(P, G, set, kind, id, field)
  if kind == 'ready' then
    P.marks[#P.marks + 1] = P.at[id]
    P.at[id] = nil
  elseif kind == 'line' then
    redis.call('HSET', G.lines, field, '')
    P.lines[string.match(field, '^(.*)\n[^\n]*$')] = true
  else
    redis.call('ZREM', set, id)
    if kind == 'scheduled' then redis.call('HDEL', G.later, id) end
  end
end

-- Advance a line's head past entries taken; an empty line leaves the ring.
local function line_trim(G, group)
  local head, waiting = group_span(G, group)
  local n = 0
  while waiting > 0 and n < PICK_TRIM and redis.call('HGET', G.lines, group .. '\n' .. head) == '' do
    redis.call('HDEL', G.lines, group .. '\n' .. head)
    head, waiting, n = head + 1, waiting - 1, n + 1
  end
  if waiting == 0 then
    redis.call('HDEL', G.lines, group, group .. '\nend')
    redis.call('LREM', G.ring, 0, group)
  elseif n > 0 then
    redis.call('HSET', G.lines, group, head)
  end
end

-- Remove the marked list entries (one LREM from the tail) and trim the lines touched.
local function pick_done(P, G)
  if #P.marks > 0 then
    for _, index in ipairs(P.marks) do redis.call('LSET', P.active, index, PICK_MARK) end
    redis.call('LREM', P.active, -#P.marks, PICK_MARK)
  end
  for group in pairs(P.lines) do line_trim(G, group) end
end
