-- Library: the recovery rule (docs/decisions.md, "Recovery at full speed"). The recovered
-- hash counts the recoveries of a job in a row. A job recovered once runs like any other,
-- so a crash costs its neighbours nothing but the lease; recovered SUSPECT times or more it
-- was in flight in two crashed processes and is a suspect: fetched alone, by a consumer that
-- runs nothing, so that a crash while it runs is surely its own.
local SUSPECT = 2
