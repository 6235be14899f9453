// gpuguard: checks the manifests of deploy/ (run by tests/scripts/deploy.sh,
// with NODE_PATH at the node_modules `npm ci` installed from this folder's
// package-lock.json). Prints one line per check, "ok NAME", "FAIL NAME: WHY"
// or "skip NAME: WHY"; exits 0 (the caller counts the lines).
//   node validate.cjs schema FILE...          validate each document against
//       its kind's real schema: kubernetes-models (built-in kinds; and no
//       field its type declarations do not name), the Prometheus Operator's
//       from @kubernetes-models/prometheus-operator, and for kyverno.io the
//       openAPIV3Schema of Kyverno's CRD at $KYVERNO_CRD (skipped if unset)
//   node validate.cjs pss LEVEL FILE...        Pod Security Standards
//       (baseline or restricted) on every Pod in the files
//   node validate.cjs policy POLICY APP PLAIN  applies the ClusterPolicy to
//       the pod APP, as Kyverno would for this policy's patches, and checks
//       the result is the pod PLAIN; then PSS restricted on what it injected
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
		"v1/Pod": v1.Pod, "v1/Service": v1.Service, "v1/ConfigMap": v1.ConfigMap,
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
	const kyverno = {};
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
				} else if (String(d.apiVersion).startsWith("kyverno.io/")) {
					if (!crd || !fs.existsSync(crd)) return skip(name, "no Kyverno CRD at ../shared/data/kyverno/kyverno.io_clusterpolicies.yaml");
					const ver = d.apiVersion.split("/")[1];
					if (!kyverno[ver]) kyverno[ver] = crdValidator(crd, ver);
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

// --- the policy, applied ----------------------------------------------------
// Kyverno's patchStrategicMerge for the constructs this policy uses: lists
// of named objects merge by name (volumeMounts by mountPath), a "+(key)"
// anchor adds key only where it is absent, other values replace. Templates:
// {{ element.name }} and the GPUGUARD_LIMIT expression.
function merge(dst, patch, listKey) {
	if (Array.isArray(patch)) {
		const out = Array.isArray(dst) ? dst.map((x) => x) : [];
		for (const p of patch) {
			const key = p && typeof p === "object" ? (p.name !== undefined ? "name" : p.mountPath !== undefined ? "mountPath" : null) : null;
			const i = key ? out.findIndex((x) => x && x[key] === p[key]) : -1;
			if (i >= 0) out[i] = merge(out[i], p);
			else out.push(merge(undefined, p));
		}
		return out;
	}
	if (patch && typeof patch === "object") {
		const out = dst && typeof dst === "object" ? { ...dst } : {};
		for (const [k, val] of Object.entries(patch)) {
			const m = /^\+\((.*)\)$/.exec(k);
			if (m) {
				if (out[m[1]] === undefined) out[m[1]] = merge(undefined, val);
			} else out[k] = merge(out[k], val);
		}
		return out;
	}
	return patch;
}

const gpuOf = (c) => c.resources && c.resources.limits && (c.resources.limits["nvidia.com/gpu"] || c.resources.limits["amd.com/gpu"]);

function subst(obj, vars) {
	if (Array.isArray(obj)) return obj.map((x) => subst(x, vars));
	if (obj && typeof obj === "object") return Object.fromEntries(Object.entries(obj).map(([k, x]) => [k, subst(x, vars)]));
	if (typeof obj !== "string") return obj;
	return obj.replace(/\{\{\s*(.*?)\s*\}\}/g, (all, e) => {
		if (!(e in vars)) throw new Error(`template not understood by this check: ${all}`);
		return vars[e];
	});
}

function applyPolicy(policy, pod, nsLabels) {
	let p = JSON.parse(JSON.stringify(pod));
	const labels = () => (p.metadata && p.metadata.labels) || {};
	const injectedNames = new Set();
	for (const rule of policy.spec.rules) {
		const sel = (r) => r.resources.selector ? Object.entries(r.resources.selector.matchLabels).every(([k, x]) => labels()[k] === x)
			: Object.entries(r.resources.namespaceSelector.matchLabels).every(([k, x]) => nsLabels[k] === x);
		if (!rule.match.any.some(sel)) continue;
		if (rule.exclude && rule.exclude.any.some(sel)) continue;
		if (!p.spec.containers.some(gpuOf)) continue;
		const ann = (p.metadata.annotations || {})["gpuguard.io/limit"];
		const vars = { 'request.object.metadata.annotations."gpuguard.io/limit" || namespaceLimit': ann || "20Gi" };
		if (rule.mutate.patchStrategicMerge) {
			const patch = rule.mutate.patchStrategicMerge;
			for (const c of [...(patch.spec.initContainers || []), ...(patch.spec.containers || [])]) injectedNames.add(c.name);
			p = merge(p, subst(patch, vars));
		}
		for (const fe of rule.mutate.foreach || []) {
			if (fe.list !== "request.object.spec.containers") throw new Error(`foreach over ${fe.list}: not understood`);
			for (const c of p.spec.containers.filter(gpuOf)) p = merge(p, subst(fe.patchStrategicMerge, { ...vars, "element.name": c.name }));
		}
	}
	return { pod: p, injectedNames };
}

// Order-insensitive for lists of named objects, as the API server is.
function canon(x) {
	if (Array.isArray(x)) {
		const y = x.map(canon);
		if (y.every((e) => e && typeof e === "object" && (e.name !== undefined || e.mountPath !== undefined))) {
			y.sort((a, b) => String(a.name ?? a.mountPath).localeCompare(String(b.name ?? b.mountPath)));
		}
		return y;
	}
	if (x && typeof x === "object") return Object.fromEntries(Object.keys(x).sort().map((k) => [k, canon(x[k])]));
	return x;
}

function diff(a, b, at) {
	if (JSON.stringify(a) === JSON.stringify(b)) return null;
	if (a && b && typeof a === "object" && typeof b === "object") {
		for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) {
			const d = diff(a[k], b[k], `${at}.${k}`);
			if (d) return d;
		}
	}
	return `${at}: policy gives ${JSON.stringify(a)}, the plain pod has ${JSON.stringify(b)}`;
}

function policy(policyFile, appFile, plainFile) {
	const pol = docs(policyFile)[0];
	const app = docs(appFile)[0];
	const plain = docs(plainFile)[0];
	const name = `policy ${policyFile} applied to ${appFile} is ${plainFile}`;
	try {
		const { pod, injectedNames } = applyPolicy(pol, app, {});
		const d = diff(canon(pod), canon(plain), "pod");
		if (d) fail(name, d);
		else ok(name);
		for (const level of ["baseline", "restricted"]) {
			const v = pssViolations(pod.spec, level, injectedNames);
			const n = `pss-${level} what ${policyFile} injects`;
			if (v.length) fail(n, v.join("; "));
			else ok(n);
		}
		// the pod-level part (volumes: no hostPath) of the mutated pod
		const v = pssViolations({ volumes: pod.spec.volumes }, "restricted");
		if (v.length) fail(`pss-restricted volumes ${policyFile} adds`, v.join("; "));
		else ok(`pss-restricted volumes ${policyFile} adds`);
		// opted out, or asking for no GPU: untouched
		const out = JSON.parse(JSON.stringify(app));
		out.metadata.labels["gpuguard.io/inject"] = "false";
		const nogpu = JSON.parse(JSON.stringify(app));
		for (const c of nogpu.spec.containers) delete c.resources;
		const viaNs = JSON.parse(JSON.stringify(app));
		delete viaNs.metadata.labels["gpuguard.io/inject"];
		const untouched = [["opted out", out, {}], ["no GPU", nogpu, {}], ["no label anywhere", viaNs, {}]];
		for (const [what, pod2, ns] of untouched) {
			const r = applyPolicy(pol, pod2, ns).pod;
			if (JSON.stringify(canon(r)) === JSON.stringify(canon(pod2))) ok(`policy leaves a pod ${what} alone`);
			else fail(`policy leaves a pod ${what} alone`, "it was mutated");
		}
		// the pod's annotation sets the limit
		const ann = JSON.parse(JSON.stringify(app));
		ann.metadata.annotations = { "gpuguard.io/limit": "8Gi" };
		const got = applyPolicy(pol, ann, {}).pod.spec.containers.filter(gpuOf)
			.map((c) => (c.env.find((e) => e.name === "GPUGUARD_LIMIT") || {}).value);
		if (got.length && got.every((x) => x === "8Gi")) ok("policy takes the limit from gpuguard.io/limit");
		else fail("policy takes the limit from gpuguard.io/limit", `GPUGUARD_LIMIT ${JSON.stringify(got)}`);
		const r = applyPolicy(pol, viaNs, { "gpuguard.io/inject": "true" }).pod;
		const want = JSON.parse(JSON.stringify(plain));
		delete want.metadata.labels["gpuguard.io/inject"];
		const d2 = diff(canon(r), canon(want), "pod");
		if (d2) fail("policy injects by the namespace's label", d2);
		else ok("policy injects by the namespace's label");
	} catch (e) {
		fail(name, e.message);
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
	const start = text.indexOf("\n## Use in a pod");
	const end = text.indexOf("\n### Watching it");
	if (start < 0 || end < 0) return fail(`readme ${file}`, 'sections "Use in a pod" .. "Watching it" not found');
	const sect = text.slice(start, end);
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

const [cmd, ...args] = process.argv.slice(2);
try {
	if (cmd === "schema") schema(args);
	else if (cmd === "pss") pss(args[0], args.slice(1));
	else if (cmd === "policy") policy(args[0], args[1], args[2]);
	else if (cmd === "rules") rules(args[0], args[1]);
	else if (cmd === "metrics") metrics(args[0], args.slice(1));
	else if (cmd === "readme") readme(args[0]);
	else throw new Error(`unknown command ${cmd}`);
} catch (e) {
	fail(`${cmd} ${args.join(" ")}`, e.message);
}
console.log(out.join("\n"));
