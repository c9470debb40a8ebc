-- Finishes an item, fenced on its token: the item is deleted and frees its dedupe key.
-- KEYS: the queue's keys, then the item's.
-- ARGV: tenant, id, token, now ('' server), max_lease_seconds
return complete_one(ARGV[1], ARGV[2], ARGV[3], clock(ARGV[4]), ARGV[5])
