// Runs many commands of the reference oracle (../shared/oracle/oracle.mjs) in one Node
// process, for cli/tests/test_sampled_oracle.rs: starting Node and importing the reference
// library costs ~0.25 s per call, several thousand calls would not fit the test's time.
//
// Usage: node oracle_batch.mjs ORACLE_MJS   (the installed copy, beside its node_modules)
// stdin: one JSON array of oracle arguments per line, e.g. ["context","F","--leaf","x","--seed","1"]
// stdout: one line per request, the oracle's own JSON answer.
//
// Each request evaluates oracle.mjs afresh (a new module instance: `?call=N`) with
// process.argv set to the request, so its argument parsing, --seed handling, file opening
// and commands are the oracle's own code, unchanged; only the library modules it imports
// are shared (Node caches them), which is what makes this fast. Its output is captured from
// process.stdout.write. Pass --seed to every request: a seeded crypto stays installed.
import readline from "node:readline";
import { pathToFileURL } from "node:url";

const [node, , oraclePath] = process.argv;
const oracle = pathToFileURL(oraclePath).href;
process.setMaxListeners(0); // each instance adds an exit hook that removes its temp folder
const realWrite = process.stdout.write.bind(process.stdout);
let n = 0;
for await (const line of readline.createInterface({ input: process.stdin })) {
	if (!line.trim()) continue;
	const args = JSON.parse(line);
	let captured = "";
	process.stdout.write = (chunk) => {
		captured += typeof chunk === "string" ? chunk : Buffer.from(chunk).toString("utf8");
		return true;
	};
	process.argv = [node, oraclePath, ...args];
	process.exitCode = undefined;
	try {
		await import(`${oracle}?call=${n++}`);
	} catch (err) {
		captured = `${JSON.stringify({ error: `batch: ${err instanceof Error ? err.message : String(err)}` })}\n`;
	} finally {
		process.stdout.write = realWrite;
	}
	const text = captured.trim();
	realWrite(`${text.includes("\n") || !text ? JSON.stringify({ error: `batch: not one JSON line: ${text.slice(0, 200)}` }) : text}\n`);
}
process.exitCode = 0;
