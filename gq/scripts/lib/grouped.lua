-- Library: the jobs waiting in a queue's groups' lines, counted without reading a line
-- (no other library needed). The lines hash holds two fields per group with jobs waiting
-- plus one per job, and such a group is in the ring or parked (lib/groups.lua): the work
-- grows with the parked groups (HEXISTS each, a parked one may have none waiting), never
-- with the jobs.
local function grouped_jobs(ring, parked, lines)
  local groups = redis.call('LLEN', ring)
  for _, group in ipairs(redis.call('ZRANGE', parked, 0, -1)) do
    groups = groups + redis.call('HEXISTS', lines, group)
  end
  return math.max(0, redis.call('HLEN', lines) - 2 * groups)
end
