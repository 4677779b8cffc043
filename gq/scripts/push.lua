-- include: chunk, types, flow, events
-- push: store each job whose id is new, append it to the active list, raise the signal
-- (unless the queue is paused: resuming raises it), and drop any cancel request left for
-- its id by an earlier job.
-- KEYS[1] data hash   KEYS[2] active list   KEYS[3] signal list   KEYS[4] flow settings hash
-- KEYS[5] cancelled sorted set
-- KEYS[#KEYS - 1], KEYS[#KEYS] the flow settings hash, the events stream (lib/events.lua)
-- ARGV    id1, message1, id2, message2, ...  (the caller sends at most 1000 pairs per call)
-- Returns an array with one integer per job, in order: 1 stored and queued, 0 the id exists.
-- Safe to replay: a replayed push finds its ids taken and changes nothing.
check_types({KEYS[1], 'hash', KEYS[2], 'list'})
local results = {}
local queued = {}
for i = 1, #ARGV, 2 do
  if redis.call('HSETNX', KEYS[1], ARGV[i], ARGV[i + 1]) == 1 then
    queued[#queued + 1] = ARGV[i]
    results[#results + 1] = 1
  else
    results[#results + 1] = 0
  end
end
events_stored('enqueued', results, ARGV, 1, 2)
if #queued > 0 then
  call_chunked('RPUSH', KEYS[2], queued)
  forget_cancels(KEYS[5], queued)
  raise_signal_unless_paused(KEYS[4], KEYS[3])
end
return results
