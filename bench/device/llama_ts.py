#!/usr/bin/env python3
"""llama-bench's JSON output (-o json) as one line: the first prompt test's and the first
generation test's avg_ts, "PROMPT DECODE" (tok/s, 1 and 2 decimals), for the device scripts'
`read -r lp ld < <(python3 bench/device/llama_ts.py FILE)`."""
import json
import sys

r = json.load(open(sys.argv[1]))
p = [x["avg_ts"] for x in r if x["n_prompt"] > 0]
g = [x["avg_ts"] for x in r if x["n_gen"] > 0]
print(round(p[0], 1), round(g[0], 2))
