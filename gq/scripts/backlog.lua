-- include: time
-- backlog (gq-worker --burst): what is left for one consumer, read in one atomic step so
-- that a job moving between the places is always counted once (a grouped job moves from
-- its group's line to the in-flight set in one fetch, a due one from scheduled to its line).
-- KEYS[1] active list   KEYS[2] scheduled sorted set   KEYS[3] this consumer's in-flight set
-- KEYS[4..10] the queue's group keys (lib/groups.lua's order; only lines is read)
-- ARGV    none
-- Returns an array of four integers: ids ready in the active list, scheduled ids due by
-- the server's TIME, ids in this consumer's in-flight set, and the fields of the groups'
-- lines (two per group with jobs waiting plus one per job: 0 exactly when no grouped job
-- waits in a line).
return {
  redis.call('LLEN', KEYS[1]),
  redis.call('ZCOUNT', KEYS[2], '-inf', server_now()),
  redis.call('SCARD', KEYS[3]),
  redis.call('HLEN', KEYS[6]),
}
