-- include: time, chunk, types, flow, ack, outcome
-- ack_results: ack.lua for jobs with an outcome to keep or a workflow to continue (SPEC
-- section 16): for each id this consumer owns, acknowledge it as ack.lua does and, in
-- the same call, write its result and its follow-ups (lib/outcome.lua). An id no longer
-- owned gets neither: its new owner will write them, so a follow-up is enqueued once.
-- KEYS[1] in-flight set   KEYS[2] data hash   KEYS[3] recovered hash   KEYS[4] held hash
-- KEYS[5] flow settings hash   KEYS[6] active list   KEYS[7] signal list
-- KEYS[8] cancelled sorted set   KEYS[9] waiting sorted set   KEYS[10] results index
-- KEYS[11..] result keys and the follow-ups' keys, as the entries name them
-- ARGV[1] the queue's channel   ARGV[2] number of ids n   ARGV[3..n+2] the ids (at most 1000)
-- ARGV[n+3..] one entry per id, in order (lib/outcome.lua)
-- Returns an array with one integer per id, in order: 1 acknowledged, 0 not owned.
check_types({KEYS[1], 'set', KEYS[2], 'hash', KEYS[3], 'hash', KEYS[4], 'hash',
             KEYS[9], 'zset', KEYS[10], 'zset'})
local n = tonumber(ARGV[2])
local ids = {}
for i = 1, n do ids[i] = ARGV[i + 2] end
local flags, owned = acknowledge(KEYS[1], KEYS[2], KEYS[3], KEYS[8], ids)
local now = server_now()
local at = n + 3
for i = 1, n do
  local ops = tonumber(ARGV[at + 3])
  if flags[i] == 1 then
    at = apply_outcome(at, ids[i], now, KEYS[9], KEYS[10], ARGV[1])
  else
    -- Skip the entry: the kinds' sizes are fixed (lib/outcome.lua).
    local skip = at + 4
    for _ = 1, ops do
      local kind = ARGV[skip]
      skip = skip + (kind == 'push' and 4 or (kind == 'member' and 7 or 6))
    end
    at = skip
  end
end
if owned > 0 then
  trim_results(KEYS[10])
  note_held(KEYS[4], KEYS[1])
  wake_after_release(KEYS[5], KEYS[6], KEYS[7])
end
return flags
