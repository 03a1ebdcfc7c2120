// Load and abuse test of a running `strata serve` (loopback only, bounded):
//   node load.mjs BASE_URL [CLIENTS] [ROUNDS]
// CLIENTS concurrent clients (default 64) each run ROUNDS (default 4) requests drawn from a mix
// of valid plain and streamed requests of both APIs, malformed and truncated JSON, bodies over
// the limit, unknown fields and wrong types, raw garbage, and clients that disconnect
// mid-stream or before the answer. No request may get a 5xx; afterwards the server must be
// healthy with no request left active, and give the same greedy text as before the load.
// Uses only node's own fetch and net (no packages).
import net from 'node:net';

const base = process.argv[2];
const clients = Number(process.argv[3] || 64), rounds = Number(process.argv[4] || 4);
const url = new URL(base);
const counts = {};
let bad = 0;
const note = (k) => { counts[k] = (counts[k] || 0) + 1; };
const fail = (why) => { bad++; console.log('FAIL ' + why); };

const chatBody = (extra) => JSON.stringify({messages: [{role: 'user', content: 'Tell me about caches'}],
  max_tokens: 6, temperature: 0, ...extra});

async function post(path, body, opts = {}) {
  return fetch(base + path, {method: 'POST', headers: {'Content-Type': 'application/json'}, body, ...opts});
}

function raw(data, keepOpenMs = 0) {
  return new Promise((resolve) => {
    const s = net.connect(Number(url.port), url.hostname, () => {
      s.write(data);
      if (keepOpenMs >= 0) setTimeout(() => s.destroy(), keepOpenMs);
    });
    let got = '';
    s.on('data', (d) => { got += d; });
    s.on('error', () => resolve('error'));
    s.on('close', () => resolve(got.split('\r\n')[0] || 'closed'));
  });
}

const kinds = [
  async function plain() {
    const r = await post('/v1/chat/completions', chatBody());
    const j = await r.json();
    if (r.status !== 200 && r.status !== 429) fail('plain: ' + r.status);
    else if (r.status === 200 && j.usage.completion_tokens !== 6) fail('plain usage ' + JSON.stringify(j.usage));
    note('plain ' + r.status);
  },
  async function streamed() {
    const r = await post('/v1/chat/completions', chatBody({stream: true}));
    const t = await r.text();
    if (r.status === 200 && !t.trimEnd().endsWith('data: [DONE]')) fail('stream not finished: ' + t.slice(-100));
    if (r.status !== 200 && r.status !== 429) fail('stream: ' + r.status);
    note('stream ' + r.status);
  },
  async function disconnectMidStream() {
    const ac = new AbortController();
    try {
      const r = await post('/v1/chat/completions', chatBody({stream: true, max_tokens: 500}), {signal: ac.signal});
      const reader = r.body.getReader();
      await reader.read();
      ac.abort();
    } catch (e) { /* aborted */ }
    note('disconnect mid-stream');
  },
  async function disconnectBeforeAnswer() {
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 30);
    try { await post('/v1/chat/completions', chatBody({max_tokens: 500}), {signal: ac.signal}); } catch (e) { /* aborted */ }
    note('disconnect before answer');
  },
  async function malformed() {
    const r = await post('/v1/chat/completions', '{"messages": [{"role": "user", "content": "x"}, ');
    if (r.status !== 400) fail('malformed: ' + r.status);
    note('malformed ' + r.status);
  },
  async function truncatedBody() {
    const body = chatBody();
    const line = await raw(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
                           `Content-Length: ${body.length + 100}\r\n\r\n${body}`, 200);
    note('truncated body: ' + line);
  },
  async function huge() {
    try {
      const r = await post('/v1/messages', 'x'.repeat(3 << 20));
      if (r.status !== 413) fail('huge: ' + r.status);
      note('huge ' + r.status);
    } catch (e) {
      note('huge: connection closed early');
    }
  },
  async function unknownFields() {
    const r = await post('/v1/chat/completions', chatBody({frob: {deep: [1, {x: null}]}, logit_bias: {}, user: 'u',
      temperature: 0, parallel_tool_calls: true}));
    if (r.status !== 200 && r.status !== 429) fail('unknown fields: ' + r.status);
    note('unknown fields ' + r.status);
  },
  async function wrongTypes() {
    const r = await post('/v1/chat/completions', JSON.stringify({messages: 'hello', max_tokens: -3}));
    if (r.status !== 400) fail('wrong types: ' + r.status);
    note('wrong types ' + r.status);
  },
  async function anthropicStream() {
    const r = await post('/v1/messages', JSON.stringify({model: 'm', max_tokens: 5, stream: true,
      messages: [{role: 'user', content: 'Hi'}]}));
    const t = await r.text();
    if (r.status === 200 && !t.includes('event: message_stop')) fail('anthropic stream unfinished');
    if (r.status !== 200 && r.status !== 429) fail('anthropic stream: ' + r.status);
    note('anthropic stream ' + r.status);
  },
  async function garbage() {
    const line = await raw('GARBAGE \x00\x01\x02 NOT HTTP\r\n\r\n', 300);
    note('garbage: ' + line.slice(0, 30));
  },
];

async function greedy() {
  const r = await post('/v1/completions', JSON.stringify({prompt: 'The expert cache', max_tokens: 12, temperature: 0,
    cache_prompt: false}));
  return (await r.json()).choices[0].text;
}

const before = await greedy();
const t0 = Date.now();
await Promise.all(Array.from({length: clients}, async (_, c) => {
  for (let i = 0; i < rounds; i++) {
    const k = kinds[(c * rounds + i) % kinds.length];
    try { await k(); } catch (e) { fail(k.name + ' threw ' + e); }
  }
}));
const secs = (Date.now() - t0) / 1000;
let active = -1;
for (let i = 0; i < 100 && active !== 0; i++) {
  await new Promise(r => setTimeout(r, 100));
  const m = await (await fetch(base + '/metrics')).text();
  active = Number(/strata_requests_active (\d+)/.exec(m)[1]);
}
if (active !== 0) fail('requests still active after the load: ' + active);
const health = await fetch(base + '/health');
if (health.status !== 200) fail('health ' + health.status);
const after = await greedy();
if (after !== before) fail(`greedy text changed: ${JSON.stringify(before)} -> ${JSON.stringify(after)}`);
console.log(`${clients * rounds} requests from ${clients} clients in ${secs.toFixed(1)} s`);
for (const k of Object.keys(counts).sort()) console.log(`  ${counts[k]}\t${k}`);
console.log(bad ? `${bad} failure(s)` : 'no failures');
process.exit(bad ? 1 : 0);
