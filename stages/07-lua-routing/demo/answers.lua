listen = 8070

local function unescape(s)
  return (s:gsub("%%(%x%x)", function(hex) return string.char(tonumber(hex, 16)) end))
end

function route(req)
  if req.path == "/go" then       -- /go?to=/somewhere: a redirect to a page of the site
    return { status = 302, location = unescape(req.query:match("to=([^&]*)") or "/") }
  end
  if req.path == "/login" then
    return { status = 200, body = "welcome\n",
             headers = { ["Set-Cookie"] = { "a=1; HttpOnly", "b=2; HttpOnly" } } }
  end
  return { status = 404 }
end
