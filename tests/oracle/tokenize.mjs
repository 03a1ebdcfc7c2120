// Tokenizer oracle: llama.cpp's tokenizer (through node-llama-cpp, vocabulary only) on a file
// of strings, for tests/t_tokenizer_oracle.sh.
//
//   node tokenize.mjs --model VOCAB.gguf --strings FILE [--pieces]
//
// FILE holds one JSON string per line (blank lines and lines starting with '#' are skipped).
// For each string prints one line:
//   HEX NOSPECIAL SPECIAL
// HEX is the UTF-8 the string became inside llama.cpp (so the C side tokenizes exactly the same
// bytes: a JS string cannot carry invalid UTF-8, and lone surrogates turn into U+FFFD), NOSPECIAL
// and SPECIAL the ids of model.tokenize(text, false) and model.tokenize(text, true),
// comma-separated, '-' when empty.
// --pieces instead prints, for every token id, "ID HEX" with HEX the UTF-8 of
// model.detokenize([id], true) (pieces that are not valid UTF-8 arrive with U+FFFD in them).
import fs from "node:fs";
import { parseCommon, importNodeLlamaCpp, run, printLine } from "./common.mjs";

const usage = "node tokenize.mjs --model VOCAB.gguf (--strings FILE | --pieces)";

const ids = a => (a.length ? Array.from(a).join(",") : "-");
const hex = s => Buffer.from(s, "utf8").toString("hex") || "-";

run("tokenize", async () => {
    const opts = parseCommon("tokenize", usage, {
        strings: { type: "string" },
        pieces: { type: "boolean", default: false }
    });
    const { getLlama, LlamaLogLevel } = await importNodeLlamaCpp();
    const llama = await getLlama({
        gpu: false, build: "never", usePrebuiltBinaries: true, progressLogs: false,
        logLevel: opts.verbose ? LlamaLogLevel.info : LlamaLogLevel.error
    });
    const model = await llama.loadModel({ modelPath: opts.model, vocabOnly: true, gpuLayers: 0 });
    const out = [];
    if (opts.values.pieces) {
        const n = model.fileInfo?.metadata?.tokenizer?.ggml?.tokens?.length;
        if (!n) throw new Error("cannot tell the vocabulary size");
        for (let id = 0; id < n; id++)
            out.push(`${id} ${hex(model.detokenize([id], true))}`);
    } else {
        if (!opts.values.strings) opts.die(`--strings or --pieces is required\nusage: ${usage}`);
        const lines = fs.readFileSync(opts.values.strings, "utf8").split("\n");
        lines.forEach((line, i) => {
            if (line.trim() === "" || line.startsWith("#")) return;
            let text;
            try {
                text = JSON.parse(line);
            } catch (e) {
                throw new Error(`${opts.values.strings}:${i + 1}: ${e.message}`);
            }
            if (typeof text !== "string") throw new Error(`${opts.values.strings}:${i + 1}: not a JSON string`);
            out.push(`${hex(text)} ${ids(model.tokenize(text, false))} ${ids(model.tokenize(text, true))}`);
        });
    }
    fs.writeSync(1, out.join("\n") + "\n");
    printLine("# done");
});
