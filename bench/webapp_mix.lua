-- bench/webapp_mix.lua - the WebApp's request mix for wrk (-s): /json, /alloc and /cpu in turn.
-- Shared by aspnet_overhead, api_latency, alloc_walk_check and perf_pair.
-- WRK_PACE_MS=N: each connection waits N ms between a response and its next request, so the
-- server runs below saturation and latency is the requests' own, not a queue's.
local paths = {"/json", "/alloc", "/cpu"}
local i = 0
request = function()
  i = i % #paths + 1
  return wrk.format("GET", paths[i])
end
local pace = tonumber(os.getenv("WRK_PACE_MS") or "")
if pace and pace > 0 then
  delay = function()
    return pace
  end
end
