// Shared by the oracle scripts: argument parsing, locating node-llama-cpp, loading llama.cpp
// (CPU prebuilt, never a source build) and creating a context whose KV cache is F32 unless asked,
// so the reference logits are not rounded through an F16 cache (ORACLE.md: ~1e-3 error otherwise).
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";

const here = path.dirname(fileURLToPath(import.meta.url));

// $ORACLE_NODE_MODULES when it has node-llama-cpp (a node_modules folder installed elsewhere, or
// lib.sh's copy without the AMX build on AMX CPUs), else tests/oracle/node_modules when `npm ci`
// ran here, else null.
export function findNodeModules() {
    const env = process.env.ORACLE_NODE_MODULES;
    if (env && fs.existsSync(path.join(env, "node-llama-cpp", "package.json"))) return path.resolve(env);
    const local = path.join(here, "node_modules");
    if (fs.existsSync(path.join(local, "node-llama-cpp", "package.json"))) return local;
    return null;
}

export async function importNodeLlamaCpp() {
    const dir = findNodeModules();
    if (!dir)
        throw new Error("node-llama-cpp not found: run `npm ci --omit=optional` in tests/oracle " +
            "or set ORACLE_NODE_MODULES to a node_modules folder that has it");
    // Resolve from inside that folder so its own dependencies (the linux-x64 prebuilt) resolve too.
    const req = createRequire(path.join(dir, "oracle-resolve.cjs"));
    return import(pathToFileURL(req.resolve("node-llama-cpp")).href);
}

function die(script, msg) {
    process.stderr.write(`oracle ${script}: ${msg}\n`);
    process.exit(2);
}

// Comma-separated non-negative token ids, or @FILE holding the same (for long prompts).
export function parseTokens(script, text) {
    if (text.startsWith("@")) text = fs.readFileSync(text.slice(1), "utf8");
    const parts = text.split(/[\s,]+/).filter(s => s.length > 0);
    if (parts.length === 0) die(script, "--tokens is empty");
    return parts.map(s => {
        if (!/^\d+$/.test(s)) die(script, `--tokens: '${s}' is not a token id`);
        return Number(s);
    });
}

function parseCount(script, name, text, min) {
    if (text === undefined) return undefined;
    if (!/^\d+$/.test(text) || Number(text) < min) die(script, `--${name} ${text}: want an integer >= ${min}`);
    return Number(text);
}

// Options every script understands; `extra` adds script-specific ones (node:util parseArgs form).
// Returns {model, cacheTypeK, cacheTypeV, threads, ctx, batch, flashAttn, verbose, values} with values = all parsed strings.
export function parseCommon(script, usage, extra = {}) {
    let parsed;
    try {
        parsed = parseArgs({
            options: {
                model: { type: "string" },
                threads: { type: "string" },
                ctx: { type: "string" },
                batch: { type: "string" },
                "flash-attn": { type: "boolean", default: false },
                "swa-full": { type: "boolean", default: false },
                "cache-type-k": { type: "string", default: "f32" },
                "cache-type-v": { type: "string", default: "f32" },
                verbose: { type: "boolean", default: false },
                help: { type: "boolean", default: false },
                ...extra
            },
            strict: true,
            allowPositionals: false
        });
    } catch (e) {
        die(script, `${e.message}\nusage: ${usage}`);
    }
    const v = parsed.values;
    if (v.help) {
        process.stdout.write(`usage: ${usage}\n`);
        process.exit(0);
    }
    if (!v.model) die(script, `--model is required\nusage: ${usage}`);
    if (!fs.existsSync(v.model)) die(script, `--model ${v.model}: no such file`);
    const kvType = name => {
        const t = String(v[name]).toUpperCase();
        if (!["F32", "F16", "BF16", "Q8_0"].includes(t)) die(script, `--${name} ${v[name]}: want f32, f16, bf16 or q8_0`);
        return t;
    };
    return {
        model: path.resolve(v.model),
        cacheTypeK: kvType("cache-type-k"),
        cacheTypeV: kvType("cache-type-v"),
        threads: parseCount(script, "threads", v.threads, 1),
        ctx: parseCount(script, "ctx", v.ctx, 1),
        batch: parseCount(script, "batch", v.batch, 1),
        flashAttn: v["flash-attn"],
        swaFull: v["swa-full"] || process.env.ORACLE_SWA_FULL === "1",  // or ORACLE_SWA_FULL=1 in the environment
        verbose: v.verbose,
        values: v,
        parseCount: (name, min) => parseCount(script, name, v[name], min),
        die: msg => die(script, msg)
    };
}

// Loads llama.cpp and the model on the CPU. llama.cpp's own log is limited to errors unless
// --verbose; its fatal aborts (bad metadata) still reach stderr, which is why callers run the
// scripts as subprocesses.
export async function loadModel(opts) {
    const { getLlama, LlamaLogLevel } = await importNodeLlamaCpp();
    const llama = await getLlama({
        gpu: false,
        build: "never",
        usePrebuiltBinaries: true,
        progressLogs: false,
        logLevel: opts.verbose ? LlamaLogLevel.info : LlamaLogLevel.error,
        ...(opts.threads ? { maxThreads: opts.threads } : {})
    });
    const model = await llama.loadModel({ modelPath: opts.model, gpuLayers: 0 });
    return { llama, model };
}

// A context with one sequence, F32 K and V unless --cache-type-k / --cache-type-v ask for F16,
// BF16 or Q8_0 (llama.cpp takes a quantized V cache only with --flash-attn), and flash attention
// off unless asked (the plain attention path is what strata computes). contextSize is rounded up
// by node-llama-cpp.
// --swa-full keeps every position of a sliding-window block in its own cache cell (llama.cpp's
// default is a ring of window + batch cells, whose cell order changes the float summation order
// of the attention in the last bit; strata keeps lanes at absolute positions, as the full cache).
export async function createContext(model, opts, minContext) {
    const contextSize = Math.max(opts.ctx ?? 0, minContext, 16);
    const batchSize = opts.batch ?? Math.min(contextSize, 512);
    return model.createContext({
        contextSize,
        batchSize,
        sequences: 1,
        flashAttention: opts.flashAttn,
        ...(opts.swaFull ? { swaFullCache: true } : {}),
        ...(opts.threads ? { threads: { ideal: opts.threads, min: opts.threads } } : {}),
        experimentalKvCacheKeyType: opts.cacheTypeK ?? "F32",
        experimentalKvCacheValueType: opts.cacheTypeV ?? "F32",
        ignoreMemorySafetyChecks: true
    });
}

// The logits Map node-llama-cpp returns (sorted by value) as a Float32Array indexed by token id.
// Throws unless it covers every id 0..n_vocab-1 exactly once.
export function logitsToArray(map, nVocab) {
    if (map.size !== nVocab) throw new Error(`logits cover ${map.size} tokens, expected ${nVocab}`);
    const row = new Float32Array(nVocab).fill(NaN);
    for (const [token, value] of map) {
        if (!(token >= 0 && token < nVocab)) throw new Error(`logit for token ${token} outside the vocabulary`);
        row[token] = value;
    }
    for (let i = 0; i < nVocab; i++)
        if (Number.isNaN(row[i])) throw new Error(`no logit for token ${i}`);
    return row;
}

// Vocabulary size as llama.cpp sees it: the length of tokenizer.ggml.tokens, which llama.cpp
// requires to match the output dimension of the head.
export function vocabSize(model) {
    const tokens = model.fileInfo?.metadata?.tokenizer?.ggml?.tokens;
    if (Array.isArray(tokens) && tokens.length > 0) return tokens.length;
    return null;
}

// Runs main(); on failure prints one error line (the stack too if ORACLE_DEBUG is set) and exits
// 1. Exits explicitly so that a lingering llama.cpp thread cannot keep the process (and the
// calling test) alive.
export function run(script, main) {
    main().then(
        () => process.exit(0),
        e => {
            const text = process.env.ORACLE_DEBUG ? (e?.stack ?? e) : (e?.message ?? e);
            process.stderr.write(`oracle ${script}: ${text}\n`);
            process.exit(1);
        });
}

// Writes all of a string to stdout synchronously (process.exit may otherwise drop piped output).
export function printLine(text) {
    fs.writeSync(1, text + "\n");
}
