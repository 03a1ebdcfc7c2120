// Loads a GGUF in llama.cpp (CPU) and evaluates a few tokens, to tell whether llama.cpp accepts
// a model at all. Prints one line:
//   ok arch=qwen3moe n_vocab=262 n_ctx_train=256 n_embd=64 argmax=[..] desc="qwen3moe ?B Q4_K - Medium"
// (desc: llama.cpp's llama_model_desc, whose last part is the file type from general.file_type)
// and exits 0; on any failure prints the reason to stderr and exits non-zero (llama.cpp may
// also abort the process on malformed metadata).
import { parseCommon, loadModel, createContext, logitsToArray, vocabSize, parseTokens, run, printLine }
    from "./common.mjs";

const usage = "node check_load.mjs --model M.gguf [--tokens 1,2,3] [--threads N] [--verbose]";

run("check_load", async () => {
    const opts = parseCommon("check_load", usage, { tokens: { type: "string" } });
    const { model } = await loadModel(opts);
    const tokens = opts.values.tokens ? parseTokens("check_load", opts.values.tokens) : [0, 1, 2, 3];
    const ctx = await createContext(model, opts, tokens.length);
    const seq = ctx.getSequence();
    const res = await seq.controlledEvaluate(
        tokens.map(t => [t, { generateNext: { logits: true } }]));
    const nVocab = res[0]?.next?.logits?.size;
    if (!nVocab) throw new Error("evaluation returned no logits");
    const fromMeta = vocabSize(model);
    if (fromMeta !== null && fromMeta !== nVocab)
        throw new Error(`tokenizer.ggml.tokens has ${fromMeta} entries but logits cover ${nVocab}`);
    const argmax = res.map((r, i) => {
        const row = logitsToArray(r.next.logits, nVocab);
        let best = 0;
        for (let t = 1; t < nVocab; t++) {
            if (!Number.isFinite(row[t])) throw new Error(`position ${i}: logit of token ${t} is ${row[t]}`);
            if (row[t] > row[best]) best = t;
        }
        return best;
    });
    printLine(`ok arch=${model.fileInfo.metadata.general.architecture} n_vocab=${nVocab} ` +
        `n_ctx_train=${model.trainContextSize} n_embd=${model.embeddingVectorSize} ` +
        `argmax=${JSON.stringify(argmax)} desc=${JSON.stringify(model.typeDescription)}`);
});
