-- What a route function costs in LuaJIT's interpreter, which rsp uses for
-- it (chapter 07: the compiler is off so that the time limit always
-- holds), next to LuaJIT's compiler. Run it both ways:
--
--   luajit -joff bench/route-micro.lua     -- the interpreter
--   luajit -joff bench/route-micro.lua 1000000 hook
--                                          -- ... with a count hook every
--                                          -- 1000 instructions, as in rsp
--   luajit bench/route-micro.lua           -- with the JIT compiler
--
-- It builds a request table like rsp's and calls two route functions on it:
-- a small one (a few string tests) and a busy one (twenty patterns tried in
-- turn). bench/route-cost runs it and puts the figures in its report.

local CALLS = tonumber(arg and arg[1]) or 1000000
local HOOK = arg and arg[2] == "hook"
if HOOK then debug.sethook(function() end, "", 1000) end

local function make_request(i)
  return {
    method = "GET", target = "/blog/2024/post-" .. (i % 100) .. "?utm=x",
    path = "/blog/2024/post-" .. (i % 100), query = "utm=x",
    host = "www.example.com", client = "192.0.2." .. (i % 250), version = "1.1",
    headers = {
      host = "www.example.com", ["user-agent"] = "Mozilla/5.0 (X11; Linux x86_64)",
      accept = "text/html", ["accept-language"] = "en", cookie = "session=abc123",
    },
  }
end

local function small(req)
  if req.path:find("^/static/") then return "static" end
  if req.host == "old.example.com" then return { status = 301, location = "https://new.example.com" .. req.path } end
  if req.headers["x-blocked"] then return { status = 403 } end
  return "app"
end

local patterns = {}
for i = 1, 20 do patterns[i] = "^/section" .. i .. "/" end
local function busy(req)
  for i = 1, #patterns do
    if req.path:find(patterns[i]) then return "pool" .. i end
  end
  if req.headers["user-agent"]:find("bot", 1, true) then return "bots" end
  return "app"
end

local function measure(name, route, with_table)
  local request = make_request(1)
  local start = os.clock()
  for i = 1, CALLS do
    if with_table then request = make_request(i) end
    route(request)
  end
  local ns = (os.clock() - start) * 1e9 / CALLS
  print(string.format("%-34s %8.0f ns per call", name, ns))
end

local mode = ((jit and jit.status()) and "JIT on" or "JIT off (interpreter)") ..
             (HOOK and ", count hook every 1000 instructions" or "")
print(string.format("%s, %s, %d calls each", jit and jit.version or "LuaJIT ?", mode, CALLS))
measure("small route", small, false)
measure("busy route (20 patterns)", busy, false)
measure("build req table + small route", small, true)
