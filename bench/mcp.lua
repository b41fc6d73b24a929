-- wrk script for MCP tools/call over one open session: $WG_MCP_SESSION, $WG_MCP_VERSION, $WG_MCP_TOOL.
-- Each request gets its own JSON-RPC id (thread number and a counter), as a real client's would.

local threads = {}

function setup(thread)
  table.insert(threads, thread)
  thread:set("id", #threads)
end

function init(args)
  counter = 0
  headers = {
    ["Content-Type"] = "application/json",
    ["Accept"] = "application/json, text/event-stream",
    ["Mcp-Session-Id"] = os.getenv("WG_MCP_SESSION"),
    ["Mcp-Protocol-Version"] = os.getenv("WG_MCP_VERSION"),
  }
  tool = os.getenv("WG_MCP_TOOL")
end

function request()
  counter = counter + 1
  local body = string.format('{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"%s","arguments":{}}}', id * 1000000000 + counter, tool)
  return wrk.format("POST", "/mcp", headers, body)
end

function response(status, headers, body)
  if status ~= 200 or string.find(body, '"isError":true', 1, true) then
    failures = (failures or 0) + 1
  end
end

function done(summary, latency, requests)
  local failed = 0
  for _, thread in ipairs(threads) do failed = failed + (thread:get("failures") or 0) end
  io.write(string.format('WRK_RESULT {"requests":%d,"non2xx":%d,"failed":%d,"durationUs":%d,"latencyP50Us":%d,"latencyP99Us":%d}\n',
    summary.requests, summary.errors.status, failed, summary.duration, latency:percentile(50), latency:percentile(99)))
end
