// gpuguard: the model of inject.cjs against Kyverno's own test cases (a
// copy of Kyverno's test/cli and two conformance cases, read at test time
// from ../shared/data/kyverno/tests, never kept in the tree). Each case is a
// policy, a resource and the resource Kyverno patched (kyverno-test.yaml or
// chainsaw-test.yaml says which is which). For every case the model takes
// on, its result must be Kyverno's: "ok case ..." or "FAIL case ...". A case
// that needs what the model does not do (a construct it throws Unsupported
// for, a cluster lookup, values files) is a "note unsupported" line with the
// reason, and a closing "note" line counts both. The model must agree on at
// least MIN_AGREE cases of each kind it is used for (ClusterPolicy,
// MutatingPolicy, MutatingAdmissionPolicy).
"use strict";
const fs = require("fs");
const path = require("path");
const YAML = require("yaml");
const m = require("./inject.cjs");

const MIN_AGREE = { ClusterPolicy: 14, MutatingPolicy: 2, MutatingAdmissionPolicy: 14 };
const out = [];
const note = (s) => out.push(`note ${s}`);

function walk(dir, found = []) {
	for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
		const p = path.join(dir, e.name);
		if (e.isDirectory()) walk(p, found);
		else if (e.name === "kyverno-test.yaml" || e.name === "chainsaw-test.yaml") found.push(p);
	}
	return found;
}
const load = (dir, files) => files.flatMap((f) => m.docs(path.join(dir, f)));
const nsName = (s) => (s.includes("/") ? s.split("/") : [null, s]);

// The cases of a kyverno-test.yaml: { name, policy, binding, resource, want (null: untouched) }
function cliCases(file) {
	const dir = path.dirname(file);
	const t = m.docs(file)[0];
	const rel = path.relative(path.resolve(dir, "../.."), dir);
	const unsupported = [];
	// a values file: its namespaces' labels are modelled, nothing else of it
	let nsLabels = {};
	const vf = t.variables || t.values;
	if (vf) {
		const v = typeof vf === "string" ? m.docs(path.join(dir, vf))[0] || {} : vf;
		const other = Object.keys(v).filter((k) => !["apiVersion", "kind", "metadata", "namespaceSelector"].includes(k));
		if (other.length) unsupported.push(`values file with ${other.join(", ")}`);
		for (const n of v.namespaceSelector || []) nsLabels[n.name] = n.labels || {};
	}
	if (t.userinfo) unsupported.push("user info");
	if (t.context) unsupported.push("a context file");
	if (t.exceptions) unsupported.push("policy exceptions");
	if (t.clusterResources) unsupported.push("cluster resources");
	if (t.targetResources) unsupported.push("mutate existing (target resources)");
	const policies = load(dir, t.policies || []);
	const order = policies;
	const resources = load(dir, t.resources || []);
	const cases = [];
	for (const r of t.results || []) {
		const [pns, pname] = nsName(r.policy);
		const policy = policies.find((p) => p.metadata.name === pname && (!pns || p.metadata.namespace === pns));
		const binding = policies.find((p) => /Binding$/.test(p.kind) && p.spec.policyName === pname);
		for (const res of r.resources || []) {
			const [rns, rname] = nsName(res);
			const resource = resources.find((x) => x.metadata.name === rname && (!r.kind || x.kind === r.kind) &&
				(!rns || (x.metadata.namespace || "default") === rns));
			let want;
			if (r.result === "skip") want = null;
			else if (r.result === "pass" && (r.patchedResources || r.patchedResource)) {
				const pr = load(dir, [r.patchedResources || r.patchedResource]);
				want = pr.find((x) => x.metadata.name === rname && x.kind === (resource || {}).kind &&
					(!rns || (x.metadata.namespace || "default") === rns)) || pr.find((x) => x.metadata.name === rname);
			} else continue; // results of validation (fail/warn) are not mutations
			// a skip of one rule: that rule alone leaves it; a pass: the
			// resource after every Kyverno policy of the test, in order
			const only = r.result === "skip" && r.rule && policy && policy.spec.rules ? { ...policy, spec: { ...policy.spec, rules: policy.spec.rules.filter((x) => x.name === r.rule) } } : null;
			const also = policy && policy.spec.rules && !only ? policies.filter((p) => p !== policy && p.spec && p.spec.rules) : [];
			cases.push({ name: `${rel} ${r.policy} on ${res}${r.rule ? ` (${r.rule})` : ""}`, policy: only || policy, also, binding, resource, want,
				order, nsLabels, unsupported: unsupported.length ? unsupported.join(", ") : !policy ? `policy ${r.policy} not found` : !resource ? `resource ${res} not found` : want === undefined ? "patched resource not found" : null });
		}
	}
	return cases;
}

// The two chainsaw cases: apply policy.yaml, then each resourceNN.yaml must
// become resourceNN-mutated.yaml
function chainsawCases(file) {
	const dir = path.dirname(file);
	const rel = path.relative(path.resolve(dir, "../../../.."), dir);
	const policy = m.docs(path.join(dir, "policy.yaml")).find((d) => /Policy$/.test(d.kind));
	return fs.readdirSync(dir).filter((f) => /^resource\d*\.yaml$/.test(f)).map((f) => ({ order: [policy],
		name: `${rel} ${f}`, policy, resource: m.docs(path.join(dir, f))[0], subset: true, also: [],
		want: m.docs(path.join(dir, f.replace(".yaml", "-mutated.yaml")))[0], unsupported: null,
	}));
}

// Serialization noise Kyverno's typed round trip adds (resources: {},
// creationTimestamp: null) is not a difference
function tidy(x) {
	if (Array.isArray(x)) return x.map(tidy);
	if (!m.isMap(x)) return x;
	const o = {};
	for (const [k, v] of Object.entries(x)) {
		const t = tidy(v);
		if (t === null || (m.isMap(t) && !Object.keys(t).length)) continue;
		o[k] = t;
	}
	return o;
}
// What of GOT the partial WANT names (a chainsaw assert is partial)
function subset(got, want) {
	if (m.isMap(want) && m.isMap(got)) return Object.fromEntries(Object.keys(want).filter((k) => k in got).map((k) => [k, subset(got[k], want[k])]));
	return got;
}

function runCase(c) {
	const kind = c.policy.kind;
	const res = c.resource;
	const ns = res.metadata.namespace || "default";
	const object = m.clone(res);
	object.metadata.namespace = ns; // as Kyverno's CLI takes it
	const req = {
		object, namespaceObject: { apiVersion: "v1", kind: "Namespace", metadata: { name: ns, labels: (c.nsLabels || {})[ns] || {} } },
		operation: "CREATE", resource: `${res.kind.toLowerCase()}s`, group: (res.apiVersion.includes("/") ? res.apiVersion.split("/")[0] : ""),
		version: res.apiVersion.split("/").pop(),
	};
	if (kind === "ClusterPolicy" || kind === "Policy") {
		// every Kyverno policy of the test, in the order of its files
		let obj = req.object, touched = false;
		for (const p of [c.policy, ...c.also].sort((a, b) => c.order.indexOf(a) - c.order.indexOf(b))) {
			if (p.kind === "Policy" && p.metadata.namespace && p.metadata.namespace !== ns) continue;
			const o = m.clusterPolicy(p, { ...req, object: obj });
			if (o) { obj = o; touched = true; }
		}
		return { way: "ClusterPolicy", out: touched ? obj : null };
	}
	if (kind === "MutatingPolicy" || kind === "NamespacedMutatingPolicy") {
		const ev = c.policy.spec.evaluation || {};
		if (c.policy.spec.targetMatchConstraints || c.policy.spec.targetMatchConditions || (ev.mutateExisting && ev.mutateExisting.enabled)) throw new m.Unsupported("mutate existing");
		return { way: "MutatingPolicy", out: m.celPolicy(c.policy, req) };
	}
	if (kind === "MutatingAdmissionPolicy") {
		return { way: "MutatingAdmissionPolicy", out: m.celPolicy(c.policy, req, c.binding) };
	}
	throw new m.Unsupported(`policy kind ${kind}`);
}

function main([dir]) {
	if (!dir || !fs.existsSync(dir)) throw new Error(`no directory ${dir}`);
	const cases = walk(dir).sort().flatMap((f) => (path.basename(f) === "chainsaw-test.yaml" ? chainsawCases(f) : cliCases(f)));
	const agree = {}, unsupported = [];
	for (const c of cases) {
		if (c.unsupported) { unsupported.push(`${c.name}\t${c.unsupported}`); continue; }
		let r;
		try {
			r = runCase(c);
		} catch (e) {
			if (e instanceof m.Unsupported || e instanceof m.cel.Unsupported) { unsupported.push(`${c.name}\t${e.message}`); continue; }
			out.push(`FAIL case ${c.name}: the model: ${e.message}`);
			continue;
		}
		let got = r && r.out ? r.out : c.resource;
		let want = c.want === null ? c.resource : c.want;
		got = tidy(got);
		want = tidy(want);
		if (!want.metadata.namespace) delete got.metadata.namespace;
		if (c.subset) got = subset(got, want);
		const d = m.diff(m.canon(got), m.canon(want));
		if (d) out.push(`FAIL case ${c.name}: the model gives ${d.slice(0, 400)}`);
		else {
			out.push(`ok case ${c.name}`);
			const way = r ? r.way : c.policy.kind;
			agree[way] = (agree[way] || 0) + 1;
		}
	}
	// not modelled, by reason
	const why = new Map();
	for (const u of unsupported) {
		const [name, reason] = u.split("\t");
		why.set(reason, [...(why.get(reason) || []), name.replace(/ on .*/, "")]);
	}
	for (const [reason, names] of why) note(`not modelled, ${reason}: ${[...new Set(names)].join("; ")}`);
	for (const [way, n] of Object.entries(MIN_AGREE)) {
		if ((agree[way] || 0) >= n) out.push(`ok the model agrees with Kyverno on ${agree[way]} ${way} cases (at least ${n})`);
		else out.push(`FAIL the model agrees with Kyverno on ${agree[way] || 0} ${way} cases, fewer than ${n}`);
	}
	note(`kyverno cases: ${Object.values(agree).reduce((a, b) => a + b, 0)} agree (${JSON.stringify(agree)}), ${unsupported.length} not modelled, of ${cases.length}`);
	console.log(out.join("\n"));
}

module.exports = { main };
