-- spec/bench/resume.sh: a RESUME_MB MiB file (default 512) whose every
-- answer is reset after RESUME_CUT_MB MiB (default 64) of body.
local MB = 1024 * 1024
local size = (tonumber(RESUME_MB) or 512) * MB
local cut = (tonumber(RESUME_CUT_MB) or 64) * MB
respond = {file = {size = size, etag = '"bench-1"', reset_after = cut}}
