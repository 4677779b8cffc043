-- include: time, chunk, types, flow, history, ack, groups, outcome
-- dead outcome: write the outcome (lib/outcome.lua's entry: the kept error, a group
-- member's failure) of a job recover.lua sent to dead, once: only while its id is in the
-- unwritten set (taken off it here), and only while it is still in dead (a job retried
-- from dead meanwhile lives again: its old life's outcome is not written). It includes
-- lib/groups.lua as kill.lua does: lib/outcome.lua's follow-ups may name a group's line.
-- KEYS[1] unwritten set   KEYS[2] dead sorted set   KEYS[3] waiting sorted set
-- KEYS[4] results index   KEYS[5] result slots registry   KEYS[6..] the slot of the
-- entry's TTL (when it keeps one), then the follow-ups' keys
-- ARGV[1] id   ARGV[2] the queue's channel   ARGV[3..] the entry
-- Returns 1 if written, 0 if not (already written, or no longer in dead).
check_types({KEYS[1], 'set', KEYS[2], 'zset', KEYS[3], 'zset', KEYS[4], 'list', KEYS[5], 'zset'})
local keeps_ttl = ARGV[3] ~= '0' and ARGV[3]
if keeps_ttl then check_types({KEYS[6], 'hash'}) end
if redis.call('SREM', KEYS[1], ARGV[1]) == 0 then return 0 end
if not redis.call('ZSCORE', KEYS[2], ARGV[1]) then return 0 end
write_killed_outcome(3, 6, keeps_ttl, ARGV[1], ARGV[2], server_now(), {KEYS[3], KEYS[4], KEYS[5]})
return 1
