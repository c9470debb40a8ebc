-- Records a trace step outside a commit. KEYS: the trace list, the trace index.
-- ARGV: now, the step JSON, trace_max. Returns the step's index.
return record_trace(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3])
