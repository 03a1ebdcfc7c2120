// Greedy generation in llama.cpp: evaluates the prompt token ids, then picks the argmax token
// n times, feeding each one back. Prints the n generated ids as one JSON array on stdout.
// Exactly n tokens come out: nothing stops at EOS/EOG, and no repetition penalty, bias or
// temperature is applied (node-llama-cpp's sampler with no options is llama.cpp's greedy
// sampler, which takes the first maximum, i.e. the lowest id on ties).
import { parseCommon, loadModel, createContext, vocabSize, parseTokens, run, printLine }
    from "./common.mjs";

const usage = "node generate.mjs --model M.gguf --tokens 1,2,3|@file -n 32 " +
    "[--threads N] [--ctx N] [--batch N] [--flash-attn] [--cache-type-k T] [--cache-type-v T] [--verbose]";

run("generate", async () => {
    const opts = parseCommon("generate", usage, {
        tokens: { type: "string" },
        n: { type: "string", short: "n" }
    });
    if (!opts.values.tokens) opts.die("--tokens is required");
    const n = opts.parseCount("n", 1) ?? 32;
    const prompt = parseTokens("generate", opts.values.tokens);

    const { model } = await loadModel(opts);
    const nVocab = vocabSize(model);
    for (const t of prompt)
        if (nVocab !== null && t >= nVocab) opts.die(`token ${t} >= n_vocab ${nVocab}`);
    // The last generated token is never fed back, so prompt + n - 1 positions are evaluated.
    const need = prompt.length + n - 1;
    const ctx = await createContext(model, opts, need);
    if (ctx.contextSize < need) throw new Error(`context holds ${ctx.contextSize} tokens, need ${need}`);
    const seq = ctx.getSequence();

    const greedy = { generateNext: { token: true } };
    const last = prompt.length - 1;
    let res = await seq.controlledEvaluate(prompt.map((t, i) => (i === last ? [t, greedy] : t)));
    const out = [];
    for (;;) {
        const token = res[res.length - 1]?.next?.token;
        if (token == null) throw new Error(`step ${out.length}: llama.cpp returned no token`);
        out.push(token);
        if (out.length === n) break;
        res = await seq.controlledEvaluate([[token, greedy]]);
    }
    printLine(JSON.stringify(out));
});
