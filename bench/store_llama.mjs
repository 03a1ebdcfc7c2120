// llama.cpp decode speed for bench/store_cgroup.sh: loads the model (mmap, CPU), evaluates the
// prompt ids, then decodes n greedy tokens, and prints {"prompt_s", "decode_s", "n"} as JSON.
import { parseCommon, loadModel, createContext, parseTokens, run, printLine } from "../tests/oracle/common.mjs";

run("store_llama", async () => {
    const opts = parseCommon("store_llama", "node store_llama.mjs --model M --tokens IDS -n N [--threads N]", {
        tokens: { type: "string" },
        n: { type: "string", short: "n" }
    });
    const n = opts.parseCount("n", 1) ?? 8;
    const prompt = parseTokens("store_llama", opts.values.tokens);
    const { model } = await loadModel(opts);
    const ctx = await createContext(model, opts, prompt.length + n + 1);
    const seq = ctx.getSequence();
    const greedy = { generateNext: { token: true } };
    let t0 = performance.now();
    let res = await seq.controlledEvaluate(prompt.map((t, i) => (i === prompt.length - 1 ? [t, greedy] : t)));
    const prompt_s = (performance.now() - t0) / 1000;
    t0 = performance.now();
    for (let i = 0; i < n; i++) {
        const token = res[res.length - 1]?.next?.token;
        res = await seq.controlledEvaluate([[token, greedy]]);
    }
    printLine(JSON.stringify({ prompt_s, decode_s: (performance.now() - t0) / 1000, n }));
});
