-- idem-bench's load for wrk (bench/src/wrk/mod.rs writes this file and runs wrk with it).
-- Arguments after `--`: the load, a prefix unique to the run, the Authorization header's
-- value ("-" for none) and how many completed keys replays cycle through.
--   idem-new       claim a new key (201), then complete it (200): one step per completion
--   idem-replay    claim a completed key (200)
--   restate-new    call Bench/charge with a new idempotency-key (200)
--   restate-replay call it with a completed call's key (200 with idempotency-expires)
-- Each thread counts the answers its scenario expects; done() prints the totals as one line
-- of JSON after the marker IDEM_BENCH, which the bench parses.

local threads = {}

function setup(thread)
  thread:set("thread_index", #threads)
  table.insert(threads, thread)
end

local load, prefix, authorization, replay_keys
local issued = 0
-- Completions owed for claims answered 201; the next request of this thread sends one, so
-- every connection keeps exactly one request in flight, as the bench's own tasks do.
local owed = {}
ok = 0
unexpected = 0
first_unexpected = ""

local loads = { ["idem-new"] = true, ["idem-replay"] = true, ["restate-new"] = true,
  ["restate-replay"] = true }

function init(args)
  if not loads[args[1]] then
    error("unknown load: " .. tostring(args[1]))
  end
  load = args[1]
  prefix = args[2]
  authorization = args[3]
  replay_keys = tonumber(args[4])
end

local function headers()
  local h = { ["Content-Type"] = "application/json" }
  if authorization ~= "-" then
    h["Authorization"] = authorization
  end
  return h
end

local function claim(key)
  local body = '{"tool":"bench.charge","args":{"amount_cents":500},"key":"' .. key .. '"}'
  return wrk.format("POST", "/v1/operations", headers(), body)
end

local function complete(id, token)
  local body = '{"lease_token":"' .. token .. '","outcome":"succeeded","result":{"ok":true}}'
  return wrk.format("POST", "/v1/operations/" .. id .. "/complete", headers(), body)
end

local function call(key)
  local h = headers()
  h["idempotency-key"] = key
  return wrk.format("POST", "/Bench/charge", h, '{"amount_cents":500}')
end

function request()
  issued = issued + 1
  local new_key = prefix .. "-w" .. thread_index .. "-" .. issued
  local done_key = prefix .. "-done-" .. (issued % replay_keys)
  if load == "idem-new" then
    return table.remove(owed, 1) or claim(new_key)
  elseif load == "idem-replay" then
    return claim(done_key)
  elseif load == "restate-new" then
    return call(new_key)
  else
    return call(done_key)
  end
end

local function refuse(status, body)
  unexpected = unexpected + 1
  if first_unexpected == "" then
    -- Only characters that need no escaping inside a JSON string.
    local text = string.sub(body or "", 1, 200):gsub('[^%w %-_:.,=/]', ' ')
    first_unexpected = status .. " " .. text
  end
end

local function has_header(headers, wanted)
  for name, _ in pairs(headers) do
    if string.lower(name) == wanted then
      return true
    end
  end
  return false
end

function response(status, headers, body)
  if load == "idem-new" and status == 201 then
    local id = body:match('^{"operation":{"id":"([^"]+)"')
    local token = body:match('"lease":{"token":"([^"]+)"')
    if id and token then
      table.insert(owed, complete(id, token))
    else
      refuse(status, body)
    end
  elseif status == 200 and (load ~= "restate-replay" or has_header(headers, "idempotency-expires")) then
    ok = ok + 1
  else
    refuse(status, body)
  end
end

function done(summary, latency, requests)
  local steps, refused, first = 0, 0, ""
  for _, thread in ipairs(threads) do
    steps = steps + thread:get("ok")
    refused = refused + thread:get("unexpected")
    if first == "" then
      first = thread:get("first_unexpected")
    end
  end
  local errors = summary.errors
  io.write(string.format(
    'IDEM_BENCH {"duration_us":%d,"requests":%d,"ok":%d,"unexpected":%d,"first_unexpected":"%s",'
      .. '"connect_errors":%d,"read_errors":%d,"write_errors":%d,"timeouts":%d,'
      .. '"p50_us":%d,"p99_us":%d}\n',
    summary.duration, summary.requests, steps, refused, first,
    errors.connect, errors.read, errors.write, errors.timeout,
    latency:percentile(50), latency:percentile(99)))
end
