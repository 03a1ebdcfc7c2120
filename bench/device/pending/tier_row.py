"""One line from a `strata run --json` of the VRAM tier: python3 tier_row.py FILE LABEL RUN [FIELD ...].
Decode and prompt tok/s, then each named field of stats.experts that is present (numbers rounded).
Nothing when the file holds no JSON (the run failed; the script says so)."""
import json
import sys

try:
    j = json.load(open(sys.argv[1]))
except Exception:
    sys.exit(0)
s = j["stats"]
t = s["experts"]
out = [sys.argv[2], "run", sys.argv[3], "decode", round(s["decode_tok_s"], 2), "prompt", round(s["prompt_tok_s"], 1)]
for k in sys.argv[4:]:
    if k in t:
        v = t[k]
        out += [k, round(v, 4) if isinstance(v, float) else v]
print(*out)
