-- Records a trace step outside a commit. KEYS: the trace list, the trace index.
-- ARGV: now ('' for the server's TIME), the step JSON, trace_max.
-- Returns the step's index and the time recorded.
local now = clock(ARGV[1])
return {record_trace(KEYS[1], KEYS[2], now, ARGV[2], ARGV[3]), now}
