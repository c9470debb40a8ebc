-- The fast path: compare-and-swap the execution and mark its event processed.
-- KEYS[1..4] and ARGV: as in the prelude; KEYS[5] the shard's processed-ages index.
-- Returns the new version.
local found = found_version(KEYS[1])
if found ~= tonumber(ARGV[1]) then
  return conflict(found)
end
write_execution(found, '', clock(ARGV[2]), KEYS[5])
return found + 1
