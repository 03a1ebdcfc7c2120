#!/usr/bin/env bash
# Regenerates the seed corpus of every harness under tests/fuzz/corpus/ with strata's own tools:
# GGUF files from `strata synth` and the tokenizer test's vocabulary writers, the rest written
# here. Run from the repository root after `make`. Fields of multi-part inputs are separated by
# the byte 0xFF (see each harness's header comment).
set -euo pipefail
B=${STRATA_BUILD:-build}
C=tests/fuzz/corpus
rm -rf "$C"
mkdir -p "$C"/{gguf,tokenizer,hf_import,chat,cli,server}
FF=$'\xff'

# gguf: one small model with tensors, vocabulary-only files (built-in, odd merges and types)
"$B"/strata synth --arch qwen3moe --preset tiny --vocab 260 --layers 1 --experts 4 --type IQ2_XXS --no-progress -o "$C"/gguf/qwen3moe_iq2xxs.gguf
"$B"/tests/test_tokenizer --make-builtin-gguf "$C"/gguf/builtin_300.gguf 300
"$B"/tests/test_tokenizer --make-odd-gguf "$C"/gguf/odd.gguf

# tokenizer: first byte picks the tokenizer and special parsing
i=0
while IFS= read -r line && [ $i -lt 24 ]; do
    printf "\\x$(printf %02x $((i % 10)))%s" "$line" > "$C/tokenizer/s$i"
    i=$((i + 1))
done < tests/data/tokenizer_strings.txt
printf '\x05<|im_start|>user\nhi<|im_end|>\n<think>\n</think>' > "$C"/tokenizer/special

# hf_import: tokenizer.json [0xFF tokenizer_config.json]
tj='{"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2,"Ġ":3,"Ġa":4},"merges":["a b","Ġ a"]},"added_tokens":[{"id":5,"content":"<|im_end|>","special":true},{"id":6,"content":"<think>","special":false}]}'
printf '%s' "$tj" > "$C"/hf_import/plain
printf '%s%s%s' "$tj" "$FF" '{"chat_template":"{{ '"'"'<|im_start|>'"'"' }}","eos_token":"<|im_end|>","add_bos_token":false}' > "$C"/hf_import/config
printf '%s%s%s' '{"model":{"vocab":{"x":0,"y":2},"merges":[["x","y"]]},"added_tokens":[]}' "$FF" '[gMASK]<sop>{{ x }}' > "$C"/hf_import/pairs

# chat: mode byte, then fields (see fuzz_chat.c)
tools='[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}}}}}]'
printf '\x00%s%s%s' "$tools" "$FF" $'Sure.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>' > "$C"/chat/parse_qwen3
printf '\x03%s%s%s' "$tools" "$FF" $'<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n<arg_key>days</arg_key>\n<arg_value>2</arg_value>\n</tool_call>' > "$C"/chat/parse_glm45
printf '\x03%s%s%s' "" "$FF" $'x<tool_call>f<arg_key>a</arg_key><arg_value>1' > "$C"/chat/parse_glm45_cut
turns="system${FF}You are helpful.${FF}${FF}user${FF}Weather?${FF}${FF}assistant${FF}<think>hm</think>ok${FF}get_weather"$'\xfe''{"city":"Paris"}'"${FF}tool${FF}{\"temp\": 21}${FF}"
for m in 1 4 7 10 13 16 19 22 25 28 31; do
    printf "\\x$(printf %02x $m)%s%s%s" "$tools" "$FF" "$turns" > "$C/chat/render_$m"
done
printf '\x02%s%s%s' '{% for m in messages %}<|im_start|>{{ m.role }}{% endfor %}' "$FF" "$turns" > "$C"/chat/template_chatml
printf '\x05%s%s%s' '[gMASK]<sop>' "$FF" "$turns" > "$C"/chat/template_glm

# cli: parser byte, then the argument
printf '\x00%s' 42 > "$C"/cli/int
printf '\x01%s' 18446744073709551615 > "$C"/cli/u64
printf '\x02%s' 0.95 > "$C"/cli/float
printf '\x03%s' 1,2,3 > "$C"/cli/ids
printf '\x04%s' '1,2;3;4,5,6' > "$C"/cli/seqs
printf '\x05%s' 1024 > "$C"/cli/cache_mib
printf '\x07%s' uring > "$C"/cli/io
printf '\x0c%s' cuda > "$C"/cli/backend

# server: endpoint byte (0 chat, 1 completions, 2 messages, 3 count_tokens), then the body
printf '\x00%s' '{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"hi"}]},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},{"role":"tool","tool_call_id":"c1","content":"21"}],"tools":'"$tools"',"stream":true,"stream_options":{"include_usage":true},"temperature":0.7,"top_p":0.9,"stop":["\n\n","END"],"logprobs":true,"top_logprobs":2,"max_tokens":16,"seed":1}' > "$C"/server/chat
printf '\x01%s' '{"prompt":"Once upon","max_tokens":8,"stop":"x","temperature":0}' > "$C"/server/completions
printf '\x01%s' '{"prompt":[1,2,3],"max_tokens":8}' > "$C"/server/completions_ids
printf '\x02%s' '{"model":"m","max_tokens":32,"system":[{"type":"text","text":"s"}],"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"text","text":"ok"},{"type":"tool_use","id":"t1","name":"get_weather","input":{"city":"Paris"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"21"}]}]}],"tools":[{"name":"get_weather","description":"d","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}],"stop_sequences":["END"],"stream":true,"top_k":5}' > "$C"/server/messages
printf '\x03%s' '{"model":"m","messages":[{"role":"user","content":"count me"}]}' > "$C"/server/count_tokens
du -sh "$C"
