-- wrk script for POST /auth/verify: thread N sends the pre-signed bodies of $WG_BODIES_DIR/bodies-N.txt
-- (one JSON body a line), each exactly once. If a thread runs out it resends its last (spent) body,
-- which the server answers 401, so it can never count as a sign-in; done() reports that it happened.

local threads = {}

function setup(thread)
  table.insert(threads, thread)
  thread:set("id", #threads)
end

function init(args)
  bodies = {}
  for line in io.lines(os.getenv("WG_BODIES_DIR") .. "/bodies-" .. id .. ".txt") do
    bodies[#bodies + 1] = line
  end
  loaded = #bodies
  used = 0
  exhausted = 0
  headers = { ["Content-Type"] = "application/json" }
end

function request()
  local body = bodies[used + 1]
  if body == nil then
    exhausted = exhausted + 1
    body = bodies[#bodies]
  else
    used = used + 1
  end
  return wrk.format("POST", "/auth/verify", headers, body)
end

function done(summary, latency, requests)
  local used_total, exhausted_total, loaded_total = 0, 0, 0
  for _, thread in ipairs(threads) do
    used_total = used_total + thread:get("used")
    exhausted_total = exhausted_total + thread:get("exhausted")
    loaded_total = loaded_total + thread:get("loaded")
  end
  local e = summary.errors
  io.write(string.format(
    'WRK_RESULT {"requests":%d,"non2xx":%d,"durationUs":%d,"connectErrors":%d,"readErrors":%d,' ..
      '"writeErrors":%d,"timeouts":%d,"latencyP50Us":%d,"latencyP99Us":%d,"latencyMaxUs":%d,' ..
      '"bodiesLoaded":%d,"bodiesSent":%d,"exhaustedRequests":%d}\n',
    summary.requests, e.status, summary.duration, e.connect, e.read, e.write, e.timeout,
    latency:percentile(50), latency:percentile(99), latency.max,
    loaded_total, used_total, exhausted_total))
end
