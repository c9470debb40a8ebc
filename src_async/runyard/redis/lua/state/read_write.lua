-- The read-back that settles a put_run/put_session whose reply was lost (runyard.writes): the
-- record's fields, and its tombstone (the last write id of the record deleted there lately).
-- KEYS: record, tombstone
-- Returns {fields as a flat list (empty: no record), the tombstone's write id or false}.
return {redis.call('HGETALL', KEYS[1]), redis.call('GET', KEYS[2])}
