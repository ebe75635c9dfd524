-- bench/webapp_mix.lua - the WebApp's request mix for wrk (-s): /json, /alloc and /cpu in turn.
-- Shared by aspnet_overhead, api_latency, alloc_walk_check and perf_pair.
local paths = {"/json", "/alloc", "/cpu"}
local i = 0
request = function()
  i = i % #paths + 1
  return wrk.format("GET", paths[i])
end
