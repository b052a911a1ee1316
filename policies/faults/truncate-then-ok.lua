-- The first answer announces 1000 bytes but sends 10 and closes (curl: "transfer
-- closed with outstanding read data remaining"); the retry gets it all.
local body = string.rep("x", 999) .. "\n"
respond = sequence{{body = body, truncate = 10}, {body = body}}
