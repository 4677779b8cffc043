-- include: events
-- progress: keep a running job's progress report (gq/store/progress.py) with its expiry
-- and, when the queue's events are on, announce it as a "progress" event.
-- KEYS[1] the job's progress key
-- KEYS[#KEYS - 1], KEYS[#KEYS] the flow settings hash, the events stream (lib/events.lua)
-- ARGV[1] job id   ARGV[2] the report (JSON)   ARGV[3] its TTL in ms   ARGV[4] the fraction
-- ARGV[5] the note   ARGV[6] the attempt that reports it
-- Returns 1.
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
if events_maxlen() > 0 then
  event_write('progress', ARGV[1], '', ARGV[6], nil, {'fraction', ARGV[4], 'note', ARGV[5]})
end
return 1
