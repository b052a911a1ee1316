-- What a fault server script can reach (spec/faults_spec.lua).
local json = require "dkjson"
respond = function ()
  -- no string.dump to make one, and load takes text only
  local binary = string.dump and load(string.dump(function () end)) and "loaded" or "refused"
  return string.format("io=%s execute=%s getenv=%s dofile=%s loadfile=%s debug=%s binary=%s "
                       .. "time=%s json=%s", tostring(io), tostring(os.execute),
                       tostring(os.getenv), tostring(dofile), tostring(loadfile),
                       tostring(debug), binary, type(os.time()), type(json))
end
