// Teacher-forced raw logits of every position from llama.cpp: feeds the given token ids as one
// sequence and writes, for each position p, the logits predicting token p+1.
// Output file: little-endian float32, [n_positions][n_vocab], row p = logits after token p, the
// layout `strata eval --logits-out` writes. stdout: one line "positions=N n_vocab=V".
// Several sequences separated by ';' are each evaluated from an empty context (the history is
// cleared between them) and their rows written one after another: the same rows as one run per
// sequence, with one model load.
// The logits are raw: node-llama-cpp's default sampler here is greedy with no penalty, bias or
// temperature, which leaves llama_get_logits_ith() untouched (see README.md for the check).
import fs from "node:fs";
import os from "node:os";
import { parseCommon, loadModel, createContext, logitsToArray, vocabSize, parseTokens, run, printLine }
    from "./common.mjs";

const usage = "node logits.mjs --model M.gguf --tokens 1,2,3[;4,5,..]|@file --out logits.f32 " +
    "[--threads N] [--ctx N] [--batch N] [--flash-attn] [--cache-type-k T] [--cache-type-v T] [--verbose]";

run("logits", async () => {
    const opts = parseCommon("logits", usage, { tokens: { type: "string" }, out: { type: "string" } });
    if (!opts.values.tokens) opts.die("--tokens is required");
    if (!opts.values.out) opts.die("--out is required");
    if (os.endianness() !== "LE") throw new Error("this host is big-endian; the output format is little-endian");
    const text = opts.values.tokens.startsWith("@") ? fs.readFileSync(opts.values.tokens.slice(1), "utf8")
        : opts.values.tokens;
    const seqs = text.split(";").map(part => parseTokens("logits", part));
    const longest = Math.max(...seqs.map(t => t.length));
    const total = seqs.reduce((n, t) => n + t.length, 0);

    const { model } = await loadModel(opts);
    const nVocabMeta = vocabSize(model);
    for (const tokens of seqs)
        for (const t of tokens)
            if (nVocabMeta !== null && t >= nVocabMeta) opts.die(`token ${t} >= n_vocab ${nVocabMeta}`);
    const ctx = await createContext(model, opts, longest);
    if (ctx.contextSize < longest)
        throw new Error(`context holds ${ctx.contextSize} tokens, need ${longest}`);
    const seq = ctx.getSequence();

    // Feed in chunks of one batch: the batches llama.cpp decodes are the same as in one call,
    // but only one chunk of vocabulary-sized Maps is alive at a time.
    const chunk = ctx.batchSize;
    const fd = fs.openSync(opts.values.out, "w");
    let nVocab = nVocabMeta;
    let written = 0;
    try {
        let base = 0;
        for (const tokens of seqs) {
            await seq.clearHistory();
            for (let start = 0; start < tokens.length; start += chunk) {
                const part = tokens.slice(start, start + chunk);
                const row0 = base + start;
                await seq.controlledEvaluate(part.map(t => [t, { generateNext: { logits: true } }]), {
                    onTokenResult(index, result) {
                        const map = result.next.logits;
                        if (!map) throw new Error(`position ${row0 + index}: no logits returned`);
                        nVocab ??= map.size;
                        const row = logitsToArray(map, nVocab);
                        delete result.next.logits;
                        const bytes = Buffer.from(row.buffer, row.byteOffset, row.byteLength);
                        fs.writeSync(fd, bytes, 0, bytes.length, (row0 + index) * nVocab * 4);
                        written++;
                    }
                });
            }
            base += tokens.length;
        }
    } finally {
        fs.closeSync(fd);
    }
    if (written !== total) throw new Error(`got logits for ${written} of ${total} positions`);
    printLine(`positions=${total} n_vocab=${nVocab}`);
});
