-- include: time
-- backlog (gq-worker --burst): what is left for one consumer, read in one atomic step so
-- that a job moving between the three places is always counted once.
-- KEYS[1] active list   KEYS[2] scheduled sorted set   KEYS[3] this consumer's in-flight set
-- ARGV    none
-- Returns an array of three integers: ids ready in the active list, scheduled ids due by
-- the server's TIME, ids in this consumer's in-flight set.
return {
  redis.call('LLEN', KEYS[1]),
  redis.call('ZCOUNT', KEYS[2], '-inf', server_now()),
  redis.call('SCARD', KEYS[3]),
}
