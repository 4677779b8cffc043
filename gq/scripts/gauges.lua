-- include: time, grouped
-- gauges (gq metrics, the dashboard): the queue-wide numbers of one scrape, read in one
-- atomic step and O(1) in the number of jobs (the grouped ones: lib/grouped.lua).
-- KEYS[1] active list   KEYS[2] scheduled sorted set   KEYS[3] dead sorted set
-- KEYS[4] data hash     KEYS[5] consumers sorted set
-- KEYS[6..12] the queue's group keys (lib/groups.lua's order; ring, parked and lines read)
-- ARGV[1] seconds of silence after which a consumer counts as dead
-- Returns an array: ids ready, ids scheduled, ids dead, messages stored, consumers
-- registered, consumers alive (heartbeat within ARGV[1] of the server's TIME), the
-- message of the oldest ready job (false if none is ready or it has no message), and the
-- server's TIME as a string of unix seconds, and the jobs waiting in the groups' lines.
-- Every stored message belongs to a job that is ready, scheduled, dead, waiting in a
-- group's line or in flight, so in flight = stored - ready - scheduled - dead - grouped.
local now = server_now()
local head = redis.call('LINDEX', KEYS[1], 0)
local message = false
if head then message = redis.call('HGET', KEYS[4], head) end
return {
  redis.call('LLEN', KEYS[1]),
  redis.call('ZCARD', KEYS[2]),
  redis.call('ZCARD', KEYS[3]),
  redis.call('HLEN', KEYS[4]),
  redis.call('ZCARD', KEYS[5]),
  redis.call('ZCOUNT', KEYS[5], now - tonumber(ARGV[1]), '+inf'),
  message,
  tostring(now),
  grouped_jobs(KEYS[6], KEYS[7], KEYS[8]),
}
