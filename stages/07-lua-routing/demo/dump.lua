listen = 8020
function route(req)
  local lines = {}
  for _, k in ipairs({ "method", "target", "path", "query", "host", "client", "version" }) do
    lines[#lines + 1] = string.format("%-8s %q", k, req[k])
  end
  local names = {}
  for name in pairs(req.headers) do names[#names + 1] = name end
  table.sort(names)
  for _, name in ipairs(names) do
    lines[#lines + 1] = string.format("headers[%q] = %q", name, req.headers[name])
  end
  return { status = 200, body = table.concat(lines, "\n") .. "\n" }
end
