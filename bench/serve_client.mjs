// Streams completions from a running `strata serve` and times them at the client:
//   node serve_client.mjs BASE_URL N_STREAMS GEN PROMPT...
// Starts N_STREAMS requests at once (prompt i taken from the list, round robin), each for GEN
// tokens (greedy, ignore_eos), and prints one JSON line: per stream the tokens, the time to the
// first token and the decode rate between first and last token; the aggregate decode rate
// (tokens after each stream's first / time from the first first-token to the last last-token);
// and the wall time.
const [base, nArg, genArg, ...prompts] = process.argv.slice(2);
const n = Number(nArg), gen = Number(genArg);

async function one(prompt, t0) {
  const r = await fetch(base + '/v1/completions', {method: 'POST', headers: {'Content-Type': 'application/json'},
    body: JSON.stringify({prompt, max_tokens: gen, temperature: 0, ignore_eos: true, stream: true,
                          stream_options: {include_usage: true}, cache_prompt: false})});
  if (!r.ok) throw new Error('HTTP ' + r.status + ': ' + await r.text());
  const reader = r.body.getReader(), dec = new TextDecoder();
  let buf = '', first = 0, last = 0, tokens = 0, text = '';
  for (;;) {
    const {done, value} = await reader.read();
    if (done) break;
    buf += dec.decode(value, {stream: true});
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const ev = buf.slice(0, i); buf = buf.slice(i + 2);
      if (!ev.startsWith('data: ') || ev === 'data: [DONE]') continue;
      const j = JSON.parse(ev.slice(6));
      if (j.usage) tokens = j.usage.completion_tokens;
      const t = j.choices[0]?.text;
      if (t) {
        const now = performance.now();
        if (!first) first = now;
        last = now;
        text += t;
      }
    }
  }
  return {tokens, ttft_s: (first - t0) / 1000, decode_tok_s: (tokens - 1) / ((last - first) / 1000), first, last, text};
}

const t0 = performance.now();
const res = await Promise.all(Array.from({length: n}, (_, i) => one(prompts[i % prompts.length], t0)));
const t1 = performance.now();
const first = Math.min(...res.map(r => r.first)), last = Math.max(...res.map(r => r.last));
const after_first = res.reduce((a, r) => a + r.tokens - 1, 0);
console.log(JSON.stringify({
  streams: n, wall_s: (t1 - t0) / 1000,
  aggregate_decode_tok_s: after_first / ((last - first) / 1000),
  per_stream: res.map(r => ({tokens: r.tokens, ttft_s: r.ttft_s, decode_tok_s: r.decode_tok_s})),
  texts: res.map(r => r.text),
}));
