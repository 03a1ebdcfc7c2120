// llama.cpp's prompt and decode speed on a GGUF, through node-llama-cpp (the pinned oracle), for
// ratios measured in the same run as strata. Same prompt token ids, same threads, F32 KV cache.
// usage: node bench/llama_bench.mjs --model M --tokens @FILE|1,2,3 -n GEN --threads T [--ctx N]
// prints one JSON line {prompt_tokens, prompt_s, prompt_tok_s, generated, decode_s, decode_tok_s}
import { parseCommon, parseTokens, loadModel, createContext } from "../tests/oracle/common.mjs";

const usage = "node bench/llama_bench.mjs --model M --tokens IDS -n GEN [--threads T] [--ctx N]";
const opts = parseCommon("llama_bench", usage, { tokens: { type: "string" }, n: { type: "string", short: "n" } });
const tokens = parseTokens("llama_bench", opts.values.tokens ?? "");
const nGen = opts.parseCount("n", 1) ?? 32;
const { model } = await loadModel(opts);
const ctx = await createContext(model, opts, tokens.length + nGen + 8);
const seq = ctx.getSequence();

// Prompt: every token but the last, in batches; the last one starts generation like in strata.
let t0 = performance.now();
await seq.evaluateWithoutGeneratingNewTokens(tokens.slice(0, -1));
const promptS = (performance.now() - t0) / 1000;

// Decode: greedy, the first token comes from evaluating the last prompt token.
let generated = 0, tFirst = 0;
t0 = performance.now();
for await (const tok of seq.evaluate(tokens.slice(-1), { temperature: 0 })) {
    void tok;
    generated++;
    if (generated === 1) tFirst = performance.now();
    if (generated >= nGen) break;
}
const decodeS = (performance.now() - tFirst) / 1000;
console.log(JSON.stringify({
    prompt_tokens: tokens.length - 1, prompt_s: promptS, prompt_tok_s: (tokens.length - 1) / promptS,
    generated, decode_s: decodeS, decode_tok_s: (generated - 1) / decodeS
}));
process.exit(0);
