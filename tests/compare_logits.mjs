// Compares two float32 logit files laid out [positions][n_vocab] (strata eval vs the oracle).
// Per position: relative L2 error ||a - b|| / ||b|| and whether the argmax agrees.
// usage: node compare_logits.mjs A.f32 B.f32 N_VOCAB TOL
// Prints one line per position when STRATA_VERBOSE is set, always a summary line
// "positions=N max_rel=... mean_rel=... argmax_mismatch=K"; exit 0 when every position is within
// TOL and every argmax agrees, 1 otherwise.
// STRATA_TIES=1: an argmax disagreement is a "near tie", not a mismatch, when B ranks A's choice
// within twice the largest per-logit difference of that position (the noise of activation
// rounding flips can reorder such a pair); the summary then adds "ties=K first_tie=P" (-1: none).
// STRATA_NEAR=X: the summary adds "near=K" (positions whose relative error is at most X).
// STRATA_SHARE=S (0..1): also at least the share S of positions must agree to 1e-5 (relative
// L2); the summary then adds "agree=K/N". TOL is then the bound every position must keep.
import fs from "node:fs";

const [fa, fb, nvs, tols] = process.argv.slice(2);
if (!fa || !fb || !nvs || !tols) {
    process.stderr.write("usage: node compare_logits.mjs A.f32 B.f32 N_VOCAB TOL\n");
    process.exit(2);
}
const read = f => { const b = fs.readFileSync(f); return new Float32Array(b.buffer, b.byteOffset, b.length / 4); };
const a = read(fa), b = read(fb), nv = Number(nvs), tol = Number(tols);
if (a.length !== b.length || a.length % nv !== 0 || a.length === 0) {
    console.log(`size mismatch: ${a.length} vs ${b.length} floats, n_vocab ${nv}`);
    process.exit(1);
}
const np = a.length / nv;
const ties = process.env.STRATA_TIES === "1";
const share = process.env.STRATA_SHARE === undefined ? null : Number(process.env.STRATA_SHARE);
let maxRel = 0, sumRel = 0, mism = 0, bad = 0, nTies = 0, firstTie = -1, agree = 0;
const rels = [];
for (let p = 0; p < np; p++) {
    let num = 0, den = 0, am = 0, bm = 0, maxAbs = 0;
    for (let i = 0; i < nv; i++) {
        const x = a[p * nv + i], y = b[p * nv + i];
        if (!Number.isFinite(x)) { num = Infinity; }
        maxAbs = Math.max(maxAbs, Math.abs(x - y));
        num += (x - y) * (x - y);
        den += y * y;
        if (x > a[p * nv + am]) am = i;
        if (y > b[p * nv + bm]) bm = i;
    }
    const rel = Math.sqrt(num / den);
    maxRel = Math.max(maxRel, rel);
    rels.push(rel);
    if (rel <= 1e-5) agree++;
    sumRel += rel;
    const tie = ties && am !== bm && b[p * nv + bm] - b[p * nv + am] <= 2 * maxAbs;
    if (tie) { nTies++; if (firstTie < 0) firstTie = p; }
    else if (am !== bm) mism++;
    if (!(rel <= tol)) bad++;
    if (process.env.STRATA_VERBOSE || am !== bm || !(rel <= tol))
        console.log(`pos ${p}: rel ${rel.toExponential(3)} argmax ${am} vs ${bm}` +
            (tie ? ` (near tie: gap ${(b[p * nv + bm] - b[p * nv + am]).toExponential(2)}, max diff ${maxAbs.toExponential(2)})` : ""));
}
rels.sort((x, y) => x - y);
const median = rels[(np - 1) >> 1];
console.log(`positions=${np} max_rel=${maxRel.toExponential(3)} mean_rel=${(sumRel / np).toExponential(3)} median_rel=${median.toExponential(3)} ` +
    `over_tol=${bad} argmax_mismatch=${mism} tol=${tol}` + (ties ? ` ties=${nTies} first_tie=${firstTie}` : "") +
    (process.env.STRATA_NEAR ? ` near=${rels.filter(r => r <= Number(process.env.STRATA_NEAR)).length}` : "") +
    (share !== null ? ` agree=${agree}/${np} (${(agree / np).toFixed(3)}, need ${share})` : ""));
const shareOk = share === null || agree >= share * np;
process.exit(bad === 0 && mism === 0 && shareOk ? 0 : 1);
