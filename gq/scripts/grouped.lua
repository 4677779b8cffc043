-- include: grouped
-- grouped (gq stats, the dashboard, Queue.stats): the jobs waiting in the groups' lines,
-- neither ready nor scheduled, read in one atomic step (lib/grouped.lua tells the cost).
-- KEYS[1] to KEYS[7] the queue's group keys (lib/groups.lua's order; only ring,
-- parked and lines are read)
-- ARGV    none
-- Returns the number of jobs waiting in the groups' lines.
return grouped_jobs(KEYS[1], KEYS[2], KEYS[3])
