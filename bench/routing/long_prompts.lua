-- wrk script: chat completions whose prompts are 4k tokens (16 KiB of messages), from 64
-- conversations with their own long system prompt, round robin: what prefix-aware routing
-- hashes and matches on every request. Prints the same WRKJSON line as bench/proxy/chat.lua.
local bodies = {}
local n = 0

function init(args)
  math.randomseed(7)
  for c = 1, 64 do
    local words = {}
    for w = 1, 2700 do words[w] = string.char(97 + math.random(0, 25), 97 + math.random(0, 25), 97 + math.random(0, 25), 97 + math.random(0, 25), 97 + math.random(0, 25)) end
    bodies[c] = '{"model":"sim","max_tokens":8,"messages":[{"role":"system","content":"' ..
                table.concat(words, " ") .. '"},{"role":"user","content":"Question ' .. c .. '?"}]}'
  end
end

function request()
  n = n + 1
  return wrk.format("POST", nil, {["Content-Type"] = "application/json"}, bodies[(n % 64) + 1])
end

function done(summary, latency, requests)
  local secs = summary.duration / 1e6
  local e = summary.errors
  io.write(string.format(
    'WRKJSON {"requests":%d,"seconds":%.3f,"rps":%.1f,"p50_us":%d,"p99_us":%d,"errors":%d}\n',
    summary.requests, secs, summary.requests / secs, latency:percentile(50), latency:percentile(99),
    e.connect + e.read + e.write + e.status + e.timeout))
end
