// Regenerates package-lock.json so that `npm ci --omit=optional` accepts it.
//
// Why: node-llama-cpp 3.22.1 lists 14 platform builds as optional dependencies, but the registry
// serves 3.22.1 of only the six Linux x64/arm ones (win-*, mac-*, linux-riscv64 stop at 3.21.1).
// `npm install` skips the missing optional packages and leaves them out of the lock, and then
// `npm ci` refuses that lock ("Missing: @node-llama-cpp/win-x64@ from lock file"). This adds an
// entry for each missing one, marked optional and limited to its os/cpu (read from its name), so
// npm never fetches it here: --omit=optional skips it and so would the os/cpu check.
// usage: node relock.mjs   (from tests/oracle; needs the registry)
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const dir = path.dirname(fileURLToPath(import.meta.url));
const lockPath = path.join(dir, "package-lock.json");

fs.rmSync(lockPath, { force: true });
execFileSync("npm", ["install", "--package-lock-only", "--ignore-scripts", "--no-audit", "--no-fund"],
    { cwd: dir, stdio: "inherit" });

const lock = JSON.parse(fs.readFileSync(lockPath, "utf8"));
const nlc = lock.packages["node_modules/node-llama-cpp"];
if (!nlc) throw new Error("node-llama-cpp is not in the lock");

const osOf = { win: "win32", mac: "darwin", linux: "linux" };
const cpuOf = { x64: "x64", arm64: "arm64", armv7l: "arm", riscv64: "riscv64" };
let added = 0;
for (const [name, version] of Object.entries(nlc.optionalDependencies ?? {})) {
    const key = `node_modules/${name}`;
    if (lock.packages[key]) continue;
    const m = /^@node-llama-cpp\/(win|mac|linux)-(x64|arm64|armv7l|riscv64)(-.*)?$/.exec(name);
    if (!m) throw new Error(`missing optional dependency ${name}: no os/cpu rule for its name`);
    lock.packages[key] = { version, optional: true, os: [osOf[m[1]]], cpu: [cpuOf[m[2]]] };
    added++;
}
lock.packages = Object.fromEntries(Object.entries(lock.packages)
    .sort(([a], [b]) => (a === "" ? -1 : b === "" ? 1 : a < b ? -1 : a > b ? 1 : 0)));
fs.writeFileSync(lockPath, JSON.stringify(lock, null, 2) + "\n");
console.log(`relock: added ${added} optional entries the registry does not serve`);
