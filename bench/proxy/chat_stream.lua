-- wrk script: the small chat completion of chat.lua (and its summary line), streamed (SSE, 8 tokens).
-- wrk runs from the repository root (bench/proxy/run.sh cds there).
dofile("bench/proxy/chat.lua")
wrk.body = '{"model":"sim","messages":[{"role":"user","content":"Say hello to the benchmark."}],"max_tokens":8,"stream":true}'
