// Drives a running `strata serve` with the official OpenAI and Anthropic clients:
//   node clients.mjs BASE_URL API_KEY
// Plain and streamed completions, stop sequences, usage counts, tool calls both ways,
// cancellation, API key refusal, concurrent requests against sequential ones (greedy), and
// prefix reuse against a fresh evaluation (log-probabilities compared exactly).
// Prints "ok NAME" / "FAIL NAME: why" per case; exits 1 if any failed.
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import assert from 'node:assert/strict';

const [base, key] = process.argv.slice(2);
const openai = new OpenAI({baseURL: base + '/v1', apiKey: key, maxRetries: 0});
const anthropic = new Anthropic({baseURL: base, apiKey: key, maxRetries: 0});
const model = 'strata';
let failed = 0;

async function check(name, fn) {
  try {
    await fn();
    console.log('ok   ' + name);
  } catch (e) {
    failed++;
    console.log('FAIL ' + name + ': ' + (e && e.stack ? e.stack : e));
  }
}

const user = (content) => ({role: 'user', content});
const greedy = {temperature: 0, model};

async function chat(messages, extra = {}) {
  return openai.chat.completions.create({messages, max_tokens: 16, ...greedy, ...extra});
}

async function chatStream(messages, extra = {}) {
  const s = await openai.chat.completions.create({messages, max_tokens: 16, ...greedy, stream: true,
    stream_options: {include_usage: true}, ...extra});
  let text = '', finish = null, usage = null, role = null;
  const calls = [];
  for await (const c of s) {
    if (c.usage) usage = c.usage;
    const ch = c.choices[0];
    if (!ch) continue;
    if (ch.delta.role) role = ch.delta.role;
    if (ch.delta.content) text += ch.delta.content;
    for (const t of ch.delta.tool_calls || []) {
      calls[t.index] ??= {name: '', arguments: ''};
      if (t.function?.name) calls[t.index].name += t.function.name;
      if (t.function?.arguments) calls[t.index].arguments += t.function.arguments;
    }
    if (ch.finish_reason) finish = ch.finish_reason;
  }
  return {text, finish, usage, role, calls};
}

const tools = [{type: 'function', function: {name: 'get_weather', description: 'Weather in a city',
  parameters: {type: 'object', properties: {city: {type: 'string'}}, required: ['city']}}}];
// A model with random weights cannot decide to call a tool: the conversation ends inside the
// assistant turn with a call already written (a prefill), the model continues it, and the server
// parses the call out of prefill + output as it would out of output alone.
const callText = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>';

await check('openai chat: plain completion and usage', async () => {
  const r = await chat([user('Tell me a story')]);
  const c = r.choices[0];
  assert.equal(c.message.role, 'assistant');
  assert.equal(typeof c.message.content, 'string');
  assert.ok(c.message.content.length > 0);
  assert.equal(r.usage.completion_tokens, 16);
  assert.equal(c.finish_reason, 'length');
  assert.ok(r.usage.prompt_tokens > 5);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + 16);
});

await check('openai chat: streamed text and usage equal the plain response', async () => {
  const msgs = [user('Stream a story')];
  const plain = await chat(msgs);
  const s = await chatStream(msgs);
  assert.equal(s.role, 'assistant');
  assert.equal(s.text, plain.choices[0].message.content);
  assert.equal(s.finish, plain.choices[0].finish_reason);
  assert.deepEqual(s.usage.completion_tokens, plain.usage.completion_tokens);
  assert.deepEqual(s.usage.prompt_tokens, plain.usage.prompt_tokens);
});

await check('openai chat: completion_tokens counts the tokens (one log-probability each)', async () => {
  const r = await chat([user('Count')], {max_tokens: 7, logprobs: true, top_logprobs: 3});
  assert.equal(r.usage.completion_tokens, 7);
  assert.equal(r.choices[0].logprobs.content.length, 7);
  for (const t of r.choices[0].logprobs.content) {
    assert.ok(t.logprob <= 0);
    assert.equal(t.top_logprobs.length, 3);
    assert.ok(t.top_logprobs[0].logprob >= t.logprob);  // greedy: the chosen token is the top one
    assert.equal(t.top_logprobs[0].token, t.token);
  }
  const joined = Buffer.from(r.choices[0].logprobs.content.flatMap(t => t.bytes)).toString('utf8');
  assert.equal(joined, r.choices[0].message.content);
});

await check('openai completions: plain and streamed', async () => {
  const r = await openai.completions.create({prompt: 'Once upon a time', max_tokens: 10, ...greedy});
  assert.equal(r.usage.completion_tokens, 10);
  const s = await openai.completions.create({prompt: 'Once upon a time', max_tokens: 10, ...greedy, stream: true});
  let text = '';
  for await (const c of s) text += c.choices[0]?.text || '';
  assert.equal(text, r.choices[0].text);
});

await check('stop sequences: OpenAI and Anthropic, plain and streamed', async () => {
  const msgs = [user('Write something long')];
  const full = (await chat(msgs, {max_tokens: 24})).choices[0].message.content;
  assert.ok(full.length >= 12, 'need some text: ' + JSON.stringify(full));
  const stop = full.slice(6, 10);
  const want = full.slice(0, full.indexOf(stop));
  const r = await chat(msgs, {max_tokens: 24, stop: [stop, 'zzzzzzzz']});
  assert.equal(r.choices[0].message.content, want);
  assert.equal(r.choices[0].finish_reason, 'stop');
  const s = await chatStream(msgs, {max_tokens: 24, stop: stop});
  assert.equal(s.text, want);
  assert.equal(s.finish, 'stop');
  const a = await anthropic.messages.create({model, max_tokens: 24, temperature: 0, messages: msgs, stop_sequences: [stop]});
  assert.equal(a.stop_reason, 'stop_sequence');
  assert.equal(a.stop_sequence, stop);
  assert.equal(a.content[0].text, want);
});

await check('anthropic messages: plain, streamed, system and usage', async () => {
  const req = {model, max_tokens: 12, temperature: 0, system: 'You are terse.',
    messages: [{role: 'user', content: [{type: 'text', text: 'Hello'}]}]};
  const r = await anthropic.messages.create(req);
  assert.equal(r.type, 'message');
  assert.equal(r.role, 'assistant');
  assert.equal(r.stop_reason, 'max_tokens');
  assert.equal(r.usage.output_tokens, 12);
  const stream = anthropic.messages.stream(req);
  let text = '';
  stream.on('text', (t) => { text += t; });
  const final = await stream.finalMessage();
  assert.equal(text, r.content[0].text);
  assert.equal(final.content[0].text, r.content[0].text);
  assert.equal(final.usage.output_tokens, 12);
  assert.equal(final.stop_reason, 'max_tokens');
  const count = await anthropic.messages.countTokens({model, system: req.system, messages: req.messages});
  assert.equal(count.input_tokens, r.usage.input_tokens);
  // The same conversation through the OpenAI API has the same prompt and the same greedy text.
  const o = await chat([{role: 'system', content: 'You are terse.'}, user('Hello')], {max_tokens: 12});
  assert.equal(o.usage.prompt_tokens, r.usage.input_tokens);
  assert.equal(o.choices[0].message.content, r.content[0].text);
});

await check('tools: rendered into the prompt', async () => {
  const without = await chat([user('Weather in Paris?')], {max_tokens: 1});
  const withTools = await chat([user('Weather in Paris?')], {max_tokens: 1, tools});
  assert.ok(withTools.usage.prompt_tokens > without.usage.prompt_tokens + 40,
            `${withTools.usage.prompt_tokens} vs ${without.usage.prompt_tokens}`);
  const none = await chat([user('Weather in Paris?')], {max_tokens: 1, tools, tool_choice: 'none'});
  assert.equal(none.usage.prompt_tokens, without.usage.prompt_tokens);
});

await check('tools: OpenAI tool_calls out, plain and streamed', async () => {
  const msgs = [user('Weather in Paris?'), {role: 'assistant', content: callText}];
  const r = await chat(msgs, {tools, max_tokens: 4});
  const m = r.choices[0].message;
  assert.equal(r.choices[0].finish_reason, 'tool_calls');
  assert.equal(m.tool_calls.length, 1);
  assert.equal(m.tool_calls[0].type, 'function');
  assert.equal(m.tool_calls[0].function.name, 'get_weather');
  assert.deepEqual(JSON.parse(m.tool_calls[0].function.arguments), {city: 'Paris'});
  assert.ok(m.tool_calls[0].id.startsWith('call_'));
  const s = await chatStream(msgs, {tools, max_tokens: 4});
  assert.equal(s.finish, 'tool_calls');
  assert.equal(s.calls.length, 1);
  assert.equal(s.calls[0].name, 'get_weather');
  assert.deepEqual(JSON.parse(s.calls[0].arguments), {city: 'Paris'});
  assert.equal(s.text, m.content ?? '');
  // Without tools in the request the same text stays text.
  const plain = await chat(msgs, {max_tokens: 4});
  assert.equal(plain.choices[0].message.tool_calls, undefined);
});

await check('tools: OpenAI tool results go back into the conversation', async () => {
  const msgs = [user('Weather in Paris?'),
    {role: 'assistant', content: null, tool_calls: [{id: 'call_1', type: 'function',
      function: {name: 'get_weather', arguments: '{"city": "Paris"}'}}]},
    {role: 'tool', tool_call_id: 'call_1', content: '{"temperature": 21}'}];
  const r = await chat(msgs, {tools, max_tokens: 3});
  assert.equal(r.usage.completion_tokens, 3);
  const short = await chat(msgs.slice(0, 1), {tools, max_tokens: 1});
  assert.ok(r.usage.prompt_tokens > short.usage.prompt_tokens + 20);
});

await check('tools: Anthropic tool_use out and tool_result in', async () => {
  const atools = [{name: 'get_weather', description: 'Weather in a city',
    input_schema: {type: 'object', properties: {city: {type: 'string'}}, required: ['city']}}];
  const r = await anthropic.messages.create({model, max_tokens: 4, temperature: 0, tools: atools,
    messages: [{role: 'user', content: 'Weather in Paris?'}, {role: 'assistant', content: callText}]});
  assert.equal(r.stop_reason, 'tool_use');
  const use = r.content.find(b => b.type === 'tool_use');
  assert.ok(use, JSON.stringify(r.content));
  assert.equal(use.name, 'get_weather');
  assert.deepEqual(use.input, {city: 'Paris'});
  const stream = anthropic.messages.stream({model, max_tokens: 4, temperature: 0, tools: atools,
    messages: [{role: 'user', content: 'Weather in Paris?'}, {role: 'assistant', content: callText}]});
  const fin = await stream.finalMessage();
  const suse = fin.content.find(b => b.type === 'tool_use');
  assert.deepEqual(suse.input, {city: 'Paris'});
  assert.equal(fin.stop_reason, 'tool_use');
  const back = await anthropic.messages.create({model, max_tokens: 3, temperature: 0, tools: atools,
    messages: [{role: 'user', content: 'Weather in Paris?'},
      {role: 'assistant', content: [{type: 'tool_use', id: use.id, name: 'get_weather', input: {city: 'Paris'}}]},
      {role: 'user', content: [{type: 'tool_result', tool_use_id: use.id, content: '21 degrees'}]}]});
  assert.equal(back.usage.output_tokens, 3);
  // the OpenAI form of the same conversation renders to the same prompt
  const o = await chat([user('Weather in Paris?'),
    {role: 'assistant', content: null, tool_calls: [{id: 'c', type: 'function', function: {name: 'get_weather', arguments: '{"city":"Paris"}'}}]},
    {role: 'tool', tool_call_id: 'c', content: '21 degrees'}], {tools, max_tokens: 3});
  assert.equal(o.usage.prompt_tokens, back.usage.input_tokens);
  assert.equal(o.choices[0].message.content, back.content[0].text);
});

await check('cancellation: a client that goes away frees its session', async () => {
  const ac = new AbortController();
  const s = await openai.chat.completions.create({messages: [user('Go on forever')], max_tokens: 3000,
    ...greedy, stream: true}, {signal: ac.signal});
  let n = 0;
  try {
    for await (const c of s) {
      if (c.choices[0]?.delta?.content && ++n === 3) {
        ac.abort();
        break;
      }
    }
  } catch (e) { /* the abort */ }
  assert.equal(n, 3);
  let active = -1;
  for (let i = 0; i < 50 && active !== 0; i++) {
    await new Promise(r => setTimeout(r, 100));
    const m = await (await fetch(base + '/metrics', {headers: {Authorization: 'Bearer ' + key}})).text();
    active = Number(/strata_requests_active (\d+)/.exec(m)[1]);
  }
  assert.equal(active, 0);
  const r = await chat([user('Still there?')], {max_tokens: 2});
  assert.equal(r.usage.completion_tokens, 2);
});

await check('API key: refused without it, in each API\'s error shape', async () => {
  const bad = new OpenAI({baseURL: base + '/v1', apiKey: 'wrong', maxRetries: 0});
  await assert.rejects(bad.chat.completions.create({messages: [user('x')], model, max_tokens: 1}),
                       (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
  const badA = new Anthropic({baseURL: base, apiKey: 'wrong', maxRetries: 0});
  await assert.rejects(badA.messages.create({model, max_tokens: 1, messages: [user('x')]}),
                       (e) => e instanceof Anthropic.AuthenticationError && e.error?.error?.type === 'authentication_error');
});

await check('concurrent requests give the same greedy text as sequential ones', async () => {
  const prompts = ['Alpha', 'Bravo charlie', 'Delta echo foxtrot', 'Golf', 'Hotel india', 'Juliet'];
  const seq = [];
  for (const p of prompts) seq.push((await chat([user(p)], {max_tokens: 20, cache_prompt: false})).choices[0].message.content);
  const par = await Promise.all(prompts.map(p => chat([user(p)], {max_tokens: 20, cache_prompt: false})));
  assert.deepEqual(par.map(r => r.choices[0].message.content), seq);
  const streams = await Promise.all(prompts.map(p => chatStream([user(p)], {max_tokens: 20, cache_prompt: false})));
  assert.deepEqual(streams.map(s => s.text), seq);
});

await check('metrics: where the CPU threads\' time went, for prompt and decode passes, and the huge pages', async () => {
  const m = await (await fetch(base + '/metrics', {headers: {Authorization: 'Bearer ' + key}})).text();
  const threads = Number(/^strata_cpu_threads (\d+)$/m.exec(m)?.[1]);
  assert.ok(threads >= 1, 'strata_cpu_threads');
  for (const pass of ['prompt', 'decode']) {
    const v = {};
    for (const kind of ['idle_serial', 'busy', 'idle_in_runs']) {
      const re = new RegExp(`^strata_cpu_thread_seconds_total\\{pass="${pass}",kind="${kind}"\\} (\\S+)$`, 'm');
      v[kind] = Number(re.exec(m)?.[1]);
      assert.ok(v[kind] >= 0, `${pass} ${kind}: ${v[kind]}`);
    }
    assert.ok(v.busy > 0, `${pass}: the threads worked`);
  }
  // the process's anonymous memory and the part of it on huge pages, and the kernel's mode for them
  const anon = Number(/^strata_memory_anon_bytes (\d+)$/m.exec(m)?.[1]);
  const huge = Number(/^strata_memory_anon_huge_bytes (\d+)$/m.exec(m)?.[1]);
  assert.ok(anon > 0 && huge >= 0 && huge <= anon, `anonymous ${anon}, on huge pages ${huge}`);
  assert.match(m, /^strata_thp_mode\{mode="(always|madvise|never|unknown)"\} 1$/m);
});

await check('prefix reuse: identical log-probabilities to a fresh evaluation', async () => {
  const first = [user('Remember the number seven.')];
  // max_tokens 1 leaves exactly the prompt in the session (the sampled token is not evaluated)
  const a = await chat(first, {max_tokens: 1});
  const longer = [...first, {role: 'assistant', content: 'Noted.'}, user('Which number was it?')];
  const reused = await chat(longer, {max_tokens: 6, logprobs: true, top_logprobs: 5});
  const fresh = await chat(longer, {max_tokens: 6, logprobs: true, top_logprobs: 5, cache_prompt: false});
  assert.equal(reused.usage.prompt_tokens_details.cached_tokens, a.usage.prompt_tokens);
  assert.equal(fresh.usage.prompt_tokens_details.cached_tokens, 0);
  assert.deepEqual(reused.choices[0].logprobs, fresh.choices[0].logprobs);
  assert.equal(reused.choices[0].message.content, fresh.choices[0].message.content);
});

await check('prefix reuse after the session ran past the shared prefix (cut back to it)', async () => {
  const first = [user('Remember the colour blue.')];
  // 8 generated tokens stay in the session; the next conversation does not contain them
  const a = await chat(first, {max_tokens: 8});
  const longer = [...first, {role: 'assistant', content: 'Blue, noted.'}, user('Which colour?')];
  const reused = await chat(longer, {max_tokens: 6, logprobs: true, top_logprobs: 5});
  const fresh = await chat(longer, {max_tokens: 6, logprobs: true, top_logprobs: 5, cache_prompt: false});
  assert.ok(reused.usage.prompt_tokens_details.cached_tokens >= a.usage.prompt_tokens,
            `${reused.usage.prompt_tokens_details.cached_tokens} cached, first prompt ${a.usage.prompt_tokens}`);
  assert.ok(reused.usage.prompt_tokens_details.cached_tokens < reused.usage.prompt_tokens);
  assert.deepEqual(reused.choices[0].logprobs, fresh.choices[0].logprobs);
});

console.log(failed ? `${failed} case(s) failed` : 'all cases passed');
process.exit(failed ? 1 : 0);
