-- Always a Google-style 409 ABORTED
respond = function ()
  return { status = 409, headers = { ["Content-Type"] = "application/json" },
           body = '{"error": {"code": 409, "status": "ABORTED", "message": "concurrent change"}}' }
end
