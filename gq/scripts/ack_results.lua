-- include: time, chunk, types, flow, ack, groups, outcome
-- ack_results: ack.lua for jobs with an outcome to keep or a workflow to continue (SPEC
-- section 16): for each id this consumer owns, acknowledge it as ack.lua does and, in
-- the same call, write its result and its follow-ups (lib/outcome.lua). An id no longer
-- owned gets neither: its new owner will write them, so a follow-up is enqueued once.
-- KEYS[1] in-flight set   KEYS[2] data hash   KEYS[3] recovered hash   KEYS[4] held hash
-- KEYS[5] flow settings hash   KEYS[6] active list   KEYS[7] signal list
-- KEYS[8] cancelled sorted set   KEYS[9] waiting sorted set   KEYS[10] results index list
-- KEYS[11..17] the group keys (a grouped job's release lowers its group's held count:
-- lib/groups.lua)   KEYS[18..] each entry's keys in turn (its result key, then its
-- follow-ups' keys)
-- ARGV[1] the queue's channel   ARGV[2] number of ids n   ARGV[3..n+2] the ids (at most 1000)
-- ARGV[n+3..] one entry per id, in order (lib/outcome.lua)
-- Returns an array with one integer per id, in order: 1 acknowledged, 0 not owned.
local G = group_keys(11)
check_types({KEYS[1], 'set', KEYS[2], 'hash', KEYS[3], 'hash', KEYS[4], 'hash',
             KEYS[9], 'zset', KEYS[10], 'list', G.of, 'hash', G.state, 'hash'})
local n = tonumber(ARGV[2])
local ids = {}
for i = 1, n do ids[i] = ARGV[i + 2] end
local flags, owned = acknowledge(KEYS[1], KEYS[2], KEYS[3], KEYS[8], ids)
local stamp = time_str(server_now())
local waited = redis.call('EXISTS', KEYS[9]) == 1
local at, k, kept = n + 3, 18, {}
for i = 1, n do
  if flags[i] == 1 then
    local keeps
    at, k, keeps = apply_outcome(at, k, ids[i], stamp, KEYS[9], ARGV[1], waited)
    if keeps then kept[#kept + 1] = ids[i] end
  else
    at, k = skip_outcome(at, k)
  end
end
if owned > 0 then
  index_results(KEYS[10], kept)
  note_held(KEYS[4], KEYS[1])
  wake_after_release(KEYS[5], KEYS[6], KEYS[7])
  local owned_ids = {}
  for i = 1, n do
    if flags[i] == 1 then owned_ids[#owned_ids + 1] = ids[i] end
  end
  group_release(G, owned_ids, KEYS[7])
end
return flags
