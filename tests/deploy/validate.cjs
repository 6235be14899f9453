// gpuguard: checks the manifests of deploy/ (run by tests/scripts/deploy.sh,
// with NODE_PATH at the node_modules `npm ci` installed from this folder's
// package-lock.json). Prints one line per check, "ok NAME", "FAIL NAME: WHY"
// or "skip NAME: WHY"; exits 0 (the caller counts the lines).
//   node validate.cjs schema FILE...          validate each document against
//       its kind's real schema: kubernetes-models (built-in kinds; and no
//       field its type declarations do not name), the Prometheus Operator's
//       from @kubernetes-models/prometheus-operator, and for kyverno.io the
//       openAPIV3Schema of Kyverno's CRDs at $KYVERNO_CRD (ClusterPolicy) and
//       $KYVERNO_MP_CRD (MutatingPolicy) (skipped if unset), and for
//       MutatingAdmissionPolicy(Binding) map-schema.json beside this file
//   node validate.cjs pss LEVEL FILE...        Pod Security Standards
//       (baseline or restricted) on every Pod in the files
//   node validate.cjs rules PROMRULE OUT       writes the rule groups of a
//       PrometheusRule to OUT (for promtool), checks every alert has a test in
//       rules-test.yaml beside PROMRULE
//   node validate.cjs metrics METRICS FILE...  every metric a PromQL expr in
//       FILE (dashboard JSON, PrometheusRule) reads is one the output METRICS
//       of `gpuguard metrics` declares (# TYPE), or a recording rule of the
//       PrometheusRules among FILE; every label they use is in METRICS or is
//       a target's (namespace, pod, ...)
//   node validate.cjs readme README            README's yaml blocks under
//       "Use in a pod" are excerpts of the deploy/ file their first line names
//       (lines "# ..." in a block elide), and every deploy/ path it names exists
"use strict";
const fs = require("fs");
const path = require("path");
const YAML = require("yaml");

const out = [];
const ok = (name) => out.push(`ok ${name}`);
const fail = (name, why) => out.push(`FAIL ${name}: ${why}`);
const skip = (name, why) => out.push(`skip ${name}: ${why}`);
const docs = (file) =>
	YAML.parseAllDocuments(fs.readFileSync(file, "utf8")).map((d) => {
		if (d.errors.length) throw new Error(`${file}: ${d.errors[0].message}`);
		return d.toJS();
	}).filter((d) => d !== null);

// --- schema ---------------------------------------------------------------
function models() {
	const v1 = require("kubernetes-models/v1");
	const apps = require("kubernetes-models/apps/v1");
	const po = require("@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1");
	return {
		"v1/Pod": v1.Pod, "v1/Service": v1.Service, "v1/ConfigMap": v1.ConfigMap, "v1/Namespace": v1.Namespace,
		"apps/v1/DaemonSet": apps.DaemonSet,
		"monitoring.coreos.com/v1/ServiceMonitor": po.ServiceMonitor,
		"monitoring.coreos.com/v1/PodMonitor": po.PodMonitor,
		"monitoring.coreos.com/v1/PrometheusRule": po.PrometheusRule,
	};
}

// The API server prunes a field its structural schema does not name: the
// field would be dropped without a word. Here it is an error: every object
// with properties, unless it preserves unknown fields, is closed.
function closed(schema) {
	if (Array.isArray(schema)) return schema.map(closed);
	if (!schema || typeof schema !== "object") return schema;
	const out = {};
	for (const [k, x] of Object.entries(schema)) {
		out[k] = k === "properties" ? Object.fromEntries(Object.entries(x).map(([p, y]) => [p, closed(y)])) : closed(x);
	}
	if (schema.properties && !schema["x-kubernetes-preserve-unknown-fields"] && schema.additionalProperties === undefined) {
		out.additionalProperties = false;
	}
	return out;
}

// kubernetes-models' schemas accept fields they do not name, which the API
// server drops (a misspelt startupProbe would vanish, and with it failing
// closed). Its type declarations name every field: each object of a built-in
// kind is walked along them, an unknown field an error; maps and inline
// types are not descended into.
const dtsCache = new Map();
function dtsFields(file) {
	if (dtsCache.has(file)) return dtsCache.get(file);
	const text = fs.readFileSync(file, "utf8");
	const imports = new Map();
	for (const m of text.matchAll(/import \{ ([^}]*) \} from "([^"]+)"/g)) {
		for (const id of m[1].split(",")) imports.set(id.trim(), m[2]);
	}
	const start = text.indexOf("export interface ");
	const body = text.slice(start, text.indexOf("\n}\n", start));
	const fields = new Map([...body.matchAll(/^ {4}"([^"]+)"\??: (.*)$/gm)].map((m) => [m[1], m[2]]));
	const r = { fields, imports };
	dtsCache.set(file, r);
	return r;
}

function resolveDts(from, spec) {
	const base = spec.startsWith(".") ? path.resolve(path.dirname(from), spec) : require.resolve(spec).replace(/\.c?js$/, "");
	return `${base}.d.ts`;
}

function unknownFields(obj, dts, at, errs) {
	if (!obj || typeof obj !== "object" || Array.isArray(obj)) return;
	const { fields, imports } = dtsFields(dts);
	for (const [k, v] of Object.entries(obj)) {
		if (!fields.has(k)) {
			errs.push(`${at}.${k} (the API server would drop it)`);
			continue;
		}
		const m = /^(?:Array<)?(I\w+)>?;$/.exec(fields.get(k));
		if (!m || !imports.has(m[1])) continue;
		const child = resolveDts(dts, imports.get(m[1]));
		if (!fs.existsSync(child)) continue;
		for (const [i, x] of (Array.isArray(v) ? v : [v]).entries()) unknownFields(x, child, Array.isArray(v) ? `${at}.${k}[${i}]` : `${at}.${k}`, errs);
	}
}

function crdValidator(crdFile, version) {
	const Ajv = require("ajv");
	// The Kubernetes extensions of a CRD schema are annotations, not rules.
	const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false });
	const crd = docs(crdFile).find((d) => d.kind === "CustomResourceDefinition");
	const v = crd.spec.versions.find((x) => x.name === version);
	if (!v) throw new Error(`${crdFile} has no version ${version}`);
	return { kind: crd.spec.names.kind, group: crd.spec.group, check: ajv.compile(closed(v.schema.openAPIV3Schema)), ajv };
}

function schema(files) {
	const m = models();
	const crd = process.env.KYVERNO_CRD;
	const mpCrd = process.env.KYVERNO_MP_CRD;
	const kyverno = {};
	const mapSchema = {};
	for (const file of files) {
		docs(file).forEach((d, i) => {
			const name = `schema ${file}${i ? `#${i}` : ""} (${d.kind})`;
			const key = `${d.apiVersion}/${d.kind}`;
			try {
				if (m[key]) {
					new m[key](d).validate();
					const errs = [];
					if (d.apiVersion === "v1") unknownFields(d, resolveDts(__filename, `kubernetes-models/v1/${d.kind}`), d.kind, errs);
					else if (d.apiVersion === "apps/v1") unknownFields(d, resolveDts(__filename, `kubernetes-models/apps/v1/${d.kind}`), d.kind, errs);
					if (errs.length) fail(name, `unknown fields: ${errs.join("; ")}`);
					else ok(name);
				} else if (d.apiVersion === "admissionregistration.k8s.io/v1" && /^MutatingAdmissionPolicy(Binding)?$/.test(d.kind)) {
					if (!mapSchema[d.kind]) {
						const Ajv = require("ajv");
						const all = JSON.parse(fs.readFileSync(path.join(__dirname, "map-schema.json"), "utf8"));
						const ajv = new Ajv({ strict: false, allErrors: true });
						mapSchema[d.kind] = ajv.compile({ definitions: all.definitions, ...all[d.kind] });
					}
					const check = mapSchema[d.kind];
					if (check(d)) ok(name);
					else fail(name, check.errors.slice(0, 5).map((e) => `${d.kind}${e.instancePath} ${e.message}` +
						(e.params && e.params.additionalProperty ? ` (${e.params.additionalProperty}, which the API server would drop)` : "")).join("; "));
				} else if (String(d.apiVersion).startsWith("kyverno.io/") || String(d.apiVersion).startsWith("policies.kyverno.io/")) {
					const file = d.apiVersion.startsWith("policies.") ? mpCrd : crd;
					if (!file || !fs.existsSync(file)) return skip(name, `no Kyverno CRD for ${d.kind} under ../shared/data/kyverno/`);
					const ver = d.apiVersion;
					if (!kyverno[ver]) kyverno[ver] = crdValidator(file, ver.split("/")[1]);
					const k = kyverno[ver];
					if (d.kind !== k.kind) return fail(name, `the CRD is for ${k.kind}`);
					if (!d.metadata || !d.metadata.name) return fail(name, "metadata.name missing");
					if (k.check(d)) ok(name);
					else fail(name, k.check.errors.slice(0, 5).map((e) => `${d.kind}${e.instancePath} ${e.message}` +
						(e.params && e.params.additionalProperty ? ` (${e.params.additionalProperty}, which the API server would drop)` : "")).join("; "));
				} else {
					fail(name, `no schema for ${key}: every manifest under deploy/ must be validated`);
				}
			} catch (e) {
				fail(name, String(e.message).split("\n").slice(0, 3).join("; "));
			}
		});
	}
}

// --- Pod Security Standards -------------------------------------------------
// https://kubernetes.io/docs/concepts/security/pod-security-standards/
const BASELINE_CAPS = new Set(["AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
	"NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"]);
const SAFE_SYSCTLS = new Set(["kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range",
	"net.ipv4.ip_unprivileged_port_start", "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range",
	"net.ipv4.ip_local_reserved_ports", "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout",
	"net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes"]);
const RESTRICTED_VOLUMES = ["configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
	"projected", "secret"];

// Returns what the pod spec violates at LEVEL; `only` limits the container
// checks to the containers named (what a policy injects).
function pssViolations(spec, level, only) {
	const v = [];
	const psc = spec.securityContext || {};
	const all = [...(spec.initContainers || []), ...(spec.containers || []), ...(spec.ephemeralContainers || [])];
	const ctrs = only ? all.filter((c) => only.has(c.name)) : all;
	if (!only) {
		for (const f of ["hostNetwork", "hostPID", "hostIPC"]) if (spec[f]) v.push(`${f} is true`);
		for (const vol of spec.volumes || []) {
			if (vol.hostPath) v.push(`volume ${vol.name} is a hostPath`);
			if (level === "restricted") {
				const type = Object.keys(vol).find((k) => k !== "name");
				if (!RESTRICTED_VOLUMES.includes(type)) v.push(`volume ${vol.name}: type ${type} is not allowed`);
			}
		}
		for (const s of (psc.sysctls || [])) if (!SAFE_SYSCTLS.has(s.name)) v.push(`sysctl ${s.name} is not safe`);
	}
	const seccompOf = (sc) => sc && sc.seccompProfile && sc.seccompProfile.type;
	if (seccompOf(psc) === "Unconfined") v.push("pod seccompProfile is Unconfined");
	if (psc.windowsOptions && psc.windowsOptions.hostProcess) v.push("pod is a Windows hostProcess");
	for (const c of ctrs) {
		const sc = c.securityContext || {};
		const n = `container ${c.name}`;
		if (sc.privileged) v.push(`${n} is privileged`);
		if (sc.windowsOptions && sc.windowsOptions.hostProcess) v.push(`${n} is a Windows hostProcess`);
		for (const p of c.ports || []) if (p.hostPort) v.push(`${n} uses hostPort ${p.hostPort}`);
		if (sc.procMount && sc.procMount !== "Default") v.push(`${n} procMount ${sc.procMount}`);
		if (seccompOf(sc) === "Unconfined") v.push(`${n} seccompProfile is Unconfined`);
		const add = (sc.capabilities && sc.capabilities.add) || [];
		for (const cap of add) {
			if (level === "restricted" ? cap !== "NET_BIND_SERVICE" : !BASELINE_CAPS.has(cap)) v.push(`${n} adds capability ${cap}`);
		}
		if (level !== "restricted") continue;
		if (sc.allowPrivilegeEscalation !== false) v.push(`${n}: allowPrivilegeEscalation is not false`);
		const drop = (sc.capabilities && sc.capabilities.drop) || [];
		if (!drop.includes("ALL")) v.push(`${n} does not drop ALL capabilities`);
		const nonRoot = sc.runAsNonRoot !== undefined ? sc.runAsNonRoot : psc.runAsNonRoot;
		if (nonRoot !== true) v.push(`${n}: runAsNonRoot is not true`);
		const uid = sc.runAsUser !== undefined ? sc.runAsUser : psc.runAsUser;
		if (uid === 0) v.push(`${n} runs as uid 0`);
		const sec = seccompOf(sc) || seccompOf(psc);
		if (sec !== "RuntimeDefault" && sec !== "Localhost") v.push(`${n}: seccompProfile is not RuntimeDefault or Localhost`);
	}
	if (level === "restricted" && psc.runAsUser === 0) v.push("pod runs as uid 0");
	return v;
}

function pss(level, files) {
	for (const file of files) {
		for (const d of docs(file)) {
			if (d.kind !== "Pod") continue;
			const name = `pss-${level} ${file} (${d.metadata.name})`;
			const v = pssViolations(d.spec, level);
			if (v.length) fail(name, v.join("; "));
			else ok(name);
		}
	}
}

// --- rules and metrics -------------------------------------------------------
function rules(promrule, outFile) {
	const pr = docs(promrule).find((d) => d.kind === "PrometheusRule");
	fs.writeFileSync(outFile, JSON.stringify({ groups: pr.spec.groups }, null, 1));
	const testFile = path.join(path.dirname(promrule), "rules-test.yaml");
	const tested = new Set();
	for (const t of docs(testFile)[0].tests || []) for (const a of t.alert_rule_test || []) {
		if ((a.exp_alerts || []).length) tested.add(a.alertname);
	}
	for (const g of pr.spec.groups) for (const r of g.rules) {
		if (!r.alert) continue;
		if (tested.has(r.alert)) ok(`rules-test fires ${r.alert}`);
		else fail(`rules-test fires ${r.alert}`, `${testFile} has no test in which it fires`);
	}
}

// Metric names a PromQL expression reads: identifiers not followed by "(",
// not label names, keywords or durations; label matchers and strings removed.
const PROMQL_WORDS = new Set(["by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or",
	"unless", "offset", "inf", "nan"]);
function metricNames(expr) {
	let e = expr.replace(/"(?:[^"\\]|\\.)*"/g, '""').replace(/\{[^}]*\}/g, "").replace(/\[[^\]]*\]/g, "");
	e = e.replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, "");
	e = e.replace(/\$\{?\w+\}?/g, "");
	const names = [];
	const re = /([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\()?/g;
	let m;
	while ((m = re.exec(e))) {
		if (m[2] || PROMQL_WORDS.has(m[1].toLowerCase())) continue;
		if (/^\d/.test(m[1])) continue;
		names.push(m[1]);
	}
	return names;
}

function exprsOf(file, raw) {
	const exprs = [];
	if (file.endsWith(".json")) {
		const walk = (x) => {
			if (Array.isArray(x)) x.forEach(walk);
			else if (x && typeof x === "object") {
				for (const [k, val] of Object.entries(x)) {
					if ((k === "expr" || k === "definition") && typeof val === "string") exprs.push(val);
					else if (k === "query" && typeof val === "string" && x.type !== "datasource") exprs.push(val);
					else walk(val);
				}
			}
		};
		walk(JSON.parse(fs.readFileSync(file, "utf8")));
	} else {
		for (const d of docs(file)) {
			if (d.kind !== "PrometheusRule") continue;
			for (const g of d.spec.groups) for (const r of g.rules) exprs.push(r.expr);
		}
	}
	if (raw) return exprs;
	// label_values(METRIC, label) reads METRIC
	return exprs.map((x) => x.replace(/label_values\(([^,]*),[^)]*\)/g, "$1"));
}

// Labels a query may use besides those `gpuguard metrics` prints: the ones
// Prometheus (and the Operator, from the ServiceMonitor) give each target.
const TARGET_LABELS = ["namespace", "pod", "container", "instance", "job", "service", "endpoint"];

function labelsUsed(file) {
	const text = fs.readFileSync(file, "utf8");
	const used = new Set();
	const add = (re, src) => { for (const m of src.matchAll(re)) for (const l of m[1].split(",")) if (l.trim()) used.add(l.trim()); };
	for (const e of exprsOf(file, true)) {
		add(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)/g, e);
		add(/[{,]\s*([a-zA-Z_]\w*)\s*(?:=~|!~|!=|=)/g, e);
		add(/label_values\([^,]*,\s*(\w+)\s*\)/g, e);
	}
	add(/\{\{\s*([a-zA-Z_]\w*)\s*\}\}/g, file.endsWith(".json") ? text : "");
	add(/\$labels\.(\w+)/g, text);
	return used;
}

// METRICS: what `gpuguard metrics` printed for a sample region
function metrics(metricsFile, files) {
	const text = fs.readFileSync(metricsFile, "utf8");
	const have = new Set([...text.matchAll(/^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) /gm)].map((m) => m[1]));
	const labels = new Set(TARGET_LABELS);
	for (const m of text.matchAll(/^[a-zA-Z_:][a-zA-Z0-9_:]*\{([^}]*)\}/gm)) {
		for (const l of m[1].matchAll(/([a-zA-Z_]\w*)="/g)) labels.add(l[1]);
	}
	if (!have.size) return fail(`metrics ${metricsFile}`, "no # TYPE lines: not gpuguard metrics output");
	for (const f of files) for (const d of f.endsWith(".json") ? [] : docs(f)) {
		if (d.kind !== "PrometheusRule") continue;
		for (const g of d.spec.groups) for (const r of g.rules) if (r.record) have.add(r.record);
	}
	for (const f of files) {
		const exprs = exprsOf(f);
		const bad = [];
		let n = 0;
		for (const e of exprs) {
			const names = metricNames(e);
			if (!names.length) bad.push(`reads no metric: ${e}`);
			for (const m of names) {
				n++;
				if (!have.has(m)) bad.push(`${m} (in ${e})`);
			}
		}
		if (!exprs.length) fail(`metrics ${f}`, "no queries found");
		else if (bad.length) fail(`metrics ${f}`, `not exported by gpuguard metrics: ${bad.join("; ")}`);
		else ok(`metrics ${f}: ${exprs.length} queries, ${n} metric uses, all exported`);
		const lbad = [...labelsUsed(f)].filter((l) => !labels.has(l) && l !== "__name__");
		if (lbad.length) fail(`labels ${f}`, `neither gpuguard metrics nor the target has: ${lbad.join(", ")}`);
		else ok(`labels ${f}: all exported or the target's`);
	}
}

// --- README -----------------------------------------------------------------
function readme(file) {
	const text = fs.readFileSync(file, "utf8");
	// the whole page: README's "Use in a pod" and docs/pod-scope.md's "In
	// Kubernetes" each quote deploy/ files
	const sect = text;
	const blocks = [...sect.matchAll(/```yaml\n([\s\S]*?)```/g)].map((m) => m[1]);
	if (!blocks.length) return fail(`readme ${file}`, "no yaml blocks");
	if (blocks.some((b) => /hostPath/.test(b))) fail(`readme ${file}: no hostPath`, "a snippet still mounts a hostPath");
	else ok(`readme ${file}: no hostPath`);
	blocks.forEach((b, i) => {
		const lines = b.replace(/\n$/, "").split("\n");
		const m = /^# ((?:tests\/)?deploy\/[^\s:]+)/.exec(lines[0]);
		const name = `readme block ${i + 1}`;
		if (!m) return fail(name, `its first line must name the deploy/ file it is taken from: ${lines[0]}`);
		if (!fs.existsSync(m[1])) return fail(name, `${m[1]} does not exist`);
		const src = fs.readFileSync(m[1], "utf8").replace(/\n$/, "").split("\n");
		// chunks separated by "# ..." lines, each a run of the file's lines, in order
		const chunks = [[]];
		for (const l of lines.slice(1)) {
			if (/^\s*# \.\.\.$/.test(l)) chunks.push([]);
			else chunks[chunks.length - 1].push(l);
		}
		let from = 0;
		for (const c of chunks) {
			if (!c.length) continue;
			let at = -1;
			for (let j = from; j + c.length <= src.length && at < 0; j++) {
				if (c.every((l, k) => src[j + k] === l)) at = j;
			}
			if (at < 0) return fail(name, `not an excerpt of ${m[1]}, from: ${c[0]}`);
			from = at + c.length;
		}
		ok(`${name} is an excerpt of ${m[1]}`);
	});
	const paths = new Set([...sect.matchAll(/(?<![\w\/.-])(?:tests\/)?deploy\/[\w./-]*\w/g)].map((x) => x[0]));
	for (const p of paths) {
		if (fs.existsSync(p)) ok(`readme names ${p}`);
		else fail(`readme names ${p}`, "it does not exist");
	}
}

module.exports = { pssViolations };
if (require.main === module) {
	const [cmd, ...args] = process.argv.slice(2);
	try {
		if (cmd === "schema") schema(args);
		else if (cmd === "pss") pss(args[0], args.slice(1));
		else if (cmd === "rules") rules(args[0], args[1]);
		else if (cmd === "metrics") metrics(args[0], args.slice(1));
		else if (cmd === "readme") readme(args[0]);
		else throw new Error(`unknown command ${cmd}`);
	} catch (e) {
		fail(`${cmd} ${args.join(" ")}`, e.message);
	}
	console.log(out.join("\n"));
}
