// Lays sessions out as pi's own /tree does: the reference library's TreeSelectorComponent
// (installed with the oracle, beside its node_modules), for cli/tests/test_tree_layout.rs.
// Nothing here computes a layout: it reads the component's own filtered, laid-out nodes.
//
// Usage: node pi_tree_layout.mjs ORACLE_HOME
// stdin: one JSON array [FILE, MODE] per line (MODE: default, no-tools, user-only,
//        labeled-only, all). FILE is opened with SessionManager.open, which rewrites a v1/v2
//        file in place: pass a copy.
// stdout: one JSON object per request: {multipleRoots, nodes: [{id, active, indent,
//        connector, isLast, gutters: [[position, show]...]}], flat: [[id, parentId]...]},
//        nodes in display order, indent as pi displays it (a root among several at 0),
//        connector whether one is drawn; flat every node in flattenTree order, unfiltered.
import readline from "node:readline";
import path from "node:path";
import { pathToFileURL } from "node:url";

const home = process.argv[2];
const dist = path.join(home, "node_modules/@earendil-works/pi-coding-agent/dist");
const load = (p) => import(pathToFileURL(path.join(dist, p)).href);
const { SessionManager } = await load("core/session-manager.js");
const theme = await load("modes/interactive/theme/theme.js");
theme.initTheme?.("dark");
const { TreeSelectorComponent } = await load("modes/interactive/components/tree-selector.js");

for await (const line of readline.createInterface({ input: process.stdin })) {
	if (!line.trim()) continue;
	const [file, mode] = JSON.parse(line);
	const sm = SessionManager.open(file, path.dirname(file));
	const leaf = sm.getLeafId();
	const list = new TreeSelectorComponent(sm.getTree(), leaf, 50, () => {}, () => {}, () => {}, undefined, mode)
		.treeList;
	const nodes = list.filteredNodes.map((n) => ({
		id: n.node.entry.id,
		active: list.activePathIds.has(n.node.entry.id),
		indent: list.multipleRoots ? Math.max(0, n.indent - 1) : n.indent,
		connector: Boolean(n.showConnector && !n.isVirtualRootChild),
		isLast: Boolean(n.isLast),
		gutters: n.gutters.map((g) => [g.position, g.show]),
	}));
	// Every node in flattenTree order (before the filter), as [id, parentId]: the order pi's
	// HTML export draws its tree in.
	const flat = list.flatNodes.map((n) => [n.node.entry.id, n.node.entry.parentId ?? null]);
	process.stdout.write(`${JSON.stringify({ multipleRoots: list.multipleRoots, nodes, flat })}\n`);
}
