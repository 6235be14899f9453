// gpuguard: what each way in (deploy/policy/) does to a pod, modelled; the
// model deploy/preview prints and tests/scripts/deploy.sh checks.
//   - MutatingAdmissionPolicy + binding and Kyverno's MutatingPolicy: match
//     constraints (resource, label selectors), matchConditions, variables and
//     JSONPatch/ApplyConfiguration mutations, through cel.cjs;
//   - Kyverno's ClusterPolicy: match/exclude, preconditions and {{ }}
//     variables through JMESPath (the jmespath package: Kyverno's language),
//     foreach, the anchors +(key) and (key) of patchStrategicMerge, then the
//     strategic merge itself. That merge is ours (smp below); the tests hold
//     it against Kubernetes' own, `kubectl patch --type strategic`, on
//     every patch they make (the referee), and the whole model against
//     Kyverno's own test cases (kyverno-cases).
// Commands (NODE_PATH at the node_modules of tests/deploy/package-lock.json):
//   node inject.cjs preview NAMESPACES POD.yaml...   a YAML stream of Pods, one
//       per way in per pod, annotated gpuguard.io/injected-by: <way>
//   node inject.cjs corpus NAMESPACES PATCHDIR POD.yaml...   the checks of the
//       corpus, one line each ("ok NAME" / "FAIL NAME: WHY"); writes each
//       strategic merge it made as PATCHDIR/N.{pod,patch,want}.json for the
//       referee
//   node inject.cjs plain NAMESPACES APP PLAIN [WAY=FILE]...   each way turns
//       the pod APP into the pod PLAIN
//   node inject.cjs kyverno-cases DIR    Kyverno's own test cases under DIR
"use strict";
const fs = require("fs");
const path = require("path");
const YAML = require("yaml");
const cel = require("./cel.cjs");

const ROOT = path.resolve(__dirname, "../..");
const WAYS = {
	MutatingAdmissionPolicy: "deploy/policy/mutatingadmissionpolicy.yaml",
	MutatingPolicy: "deploy/policy/mutatingpolicy.yaml",
	ClusterPolicy: "deploy/policy/clusterpolicy.yaml",
};
const clone = (x) => (x === undefined ? undefined : JSON.parse(JSON.stringify(x)));
const isMap = (x) => x !== null && typeof x === "object" && !Array.isArray(x);
const docs = (file) =>
	YAML.parseAllDocuments(fs.readFileSync(file, "utf8")).map((d) => {
		if (d.errors.length) throw new Error(`${file}: ${d.errors[0].message}`);
		return d.toJS();
	}).filter((d) => d !== null && d !== undefined);
class Unsupported extends Error {}

// --- label selectors ----------------------------------------------------------
function selects(sel, labels) {
	if (!sel) return true;
	labels = labels || {};
	for (const [k, v] of Object.entries(sel.matchLabels || {})) if (labels[k] !== v) return false;
	for (const e of sel.matchExpressions || []) {
		const has = Object.prototype.hasOwnProperty.call(labels, e.key);
		switch (e.operator) {
		case "In": if (!has || !e.values.includes(labels[e.key])) return false; break;
		case "NotIn": if (has && e.values.includes(labels[e.key])) return false; break;
		case "Exists": if (!has) return false; break;
		case "DoesNotExist": if (has) return false; break;
		default: throw new Unsupported(`selector operator ${e.operator}`);
		}
	}
	return true;
}

// --- JSON patch (RFC 6902) ------------------------------------------------------
function pointer(p) {
	if (p === "") return [];
	if (!p.startsWith("/")) throw new Error(`JSON pointer ${p}`);
	return p.slice(1).split("/").map((s) => s.replace(/~1/g, "/").replace(/~0/g, "~"));
}
// ENSURE: an add makes the maps its path lacks (Kyverno applies its JSON
// patches so, as EnsurePathExistsOnAdd; the API server does not)
function jsonPatch(doc, ops, ensure = false) {
	doc = clone(doc);
	if (!Array.isArray(ops)) throw new Error("a JSON patch is a list of operations");
	for (const op of ops) {
		const keys = pointer(op.path);
		const last = keys.pop();
		let parent = doc;
		for (const key of keys) {
			let next = Array.isArray(parent) ? parent[Number(key)] : parent[key];
			if ((next === undefined || next === null) && ensure && op.op === "add" && !Array.isArray(parent)) next = parent[key] = {};
			parent = next;
			if (parent === undefined || parent === null) throw new Error(`${op.op} ${op.path}: no parent`);
		}
		const value = clone(op.value);
		switch (op.op) {
		case "add":
			if (Array.isArray(parent)) {
				const i = last === "-" ? parent.length : Number(last);
				if (!(i >= 0 && i <= parent.length)) throw new Error(`add ${op.path}: index out of range`);
				parent.splice(i, 0, value);
			} else parent[last] = value;
			break;
		case "replace":
			if (Array.isArray(parent)) parent[Number(last)] = value;
			else { if (!(last in parent)) throw new Error(`replace ${op.path}: no such member`); parent[last] = value; }
			break;
		case "remove":
			if (Array.isArray(parent)) parent.splice(Number(last), 1);
			else { if (!(last in parent)) throw new Error(`remove ${op.path}: no such member`); delete parent[last]; }
			break;
		case "test": {
			const got = Array.isArray(parent) ? parent[Number(last)] : parent[last];
			if (JSON.stringify(canon(got)) !== JSON.stringify(canon(value))) throw new Error(`test ${op.path} failed`);
			break;
		}
		default: throw new Unsupported(`JSON patch op ${op.op}`);
		}
	}
	return doc;
}

// --- strategic merge ------------------------------------------------------------
// Lists of maps merge by the first of these keys every element has (the
// keys kustomize's kyaml treats as associative, which is what Kyverno's
// patchStrategicMerge runs; for a Pod they are Kubernetes' patchMergeKeys);
// other lists are replaced. A null value deletes; "$patch: delete" removes
// a list element, "$patch: replace" replaces a map.
const MERGE_KEYS = ["mountPath", "devicePath", "ip", "type", "topologyKey", "name", "containerPort"];
function mergeKeyOf(list) {
	if (!list.length || !list.every(isMap)) return null;
	return MERGE_KEYS.find((k) => list.every((e) => e[k] !== undefined)) || null;
}
function smp(dst, patch) {
	if (isMap(patch)) {
		if (patch.$patch === "replace") { const p = clone(patch); delete p.$patch; return p; }
		const out = isMap(dst) ? { ...dst } : {};
		for (const [k, v] of Object.entries(patch)) {
			if (k === "$patch") continue;
			if (k.startsWith("$setElementOrder") || k.startsWith("$retainKeys")) throw new Unsupported(`directive ${k}`);
			if (v === null) delete out[k];
			else out[k] = smp(out[k], v);
		}
		return out;
	}
	if (Array.isArray(patch)) {
		const key = mergeKeyOf(patch.filter((e) => !(isMap(e) && e.$patch === "delete")).length ? patch : patch);
		if (!key || !Array.isArray(dst) || !(dst.length === 0 || mergeKeyOf(dst) === key)) {
			if (patch.some((e) => isMap(e) && e.$patch)) throw new Unsupported("$patch in a list without a merge key");
			return clone(patch);
		}
		const out = dst.map((x) => x);
		for (const p of patch) {
			const i = out.findIndex((x) => x[key] === p[key]);
			if (p.$patch === "delete") { if (i >= 0) out.splice(i, 1); continue; }
			if (i >= 0) out[i] = smp(out[i], p);
			else out.push(smp(undefined, p));
		}
		return out;
	}
	return clone(patch);
}

// --- ApplyConfiguration (server-side apply's merge) -----------------------------
// For the fields of the test cases: maps merge, lists of maps with a name
// merge by it, other lists are atomic (replaced).
function apply(dst, cfg) {
	if (isMap(cfg)) {
		const out = isMap(dst) ? { ...dst } : {};
		for (const [k, v] of Object.entries(cfg)) out[k] = apply(out[k], v);
		return out;
	}
	if (Array.isArray(cfg) && cfg.every((e) => isMap(e) && e.name !== undefined) && Array.isArray(dst) && cfg.length) {
		const out = dst.map((x) => x);
		for (const p of cfg) {
			const i = out.findIndex((x) => x.name === p.name);
			if (i >= 0) out[i] = apply(out[i], p);
			else out.push(apply(undefined, p));
		}
		return out;
	}
	return clone(cfg);
}

// --- CEL policies: MutatingAdmissionPolicy (+ binding) and MutatingPolicy --------
// REQ: { object, namespaceObject, operation, resource: "pods", ... }.
// Returns the mutated object, or null where the policy does not apply.
function resourceMatches(constraints, req) {
	const rules = (constraints && constraints.resourceRules) || [];
	const hit = rules.some((r) =>
		(r.operations || ["*"]).some((o) => o === "*" || o === req.operation) &&
		(r.resources || []).some((x) => x === "*" || x === req.resource) &&
		(r.apiGroups || [""]).some((g) => g === "*" || g === req.group) &&
		(r.apiVersions || ["*"]).some((v) => v === "*" || v === req.version));
	if (!hit) return false;
	for (const r of (constraints && constraints.excludeResourceRules) || []) {
		if ((r.resourceNames || []).length && !(r.resourceNames || []).includes(req.object.metadata.name)) continue;
		if ((r.resources || []).some((x) => x === "*" || x === req.resource)) return false;
	}
	for (const r of rules) if ((r.resourceNames || []).length && !r.resourceNames.includes(req.object.metadata.name)) return false;
	if (constraints.namespaceSelector && !selects(constraints.namespaceSelector, req.namespaceObject && req.namespaceObject.metadata.labels)) return false;
	if (constraints.objectSelector && !selects(constraints.objectSelector, req.object.metadata.labels)) return false;
	return true;
}
function celPolicy(policy, req, binding, params, opts = {}) {
	const spec = policy.spec;
	if (spec.paramKind && !params) throw new Unsupported("a policy with params and none given");
	if (!resourceMatches(spec.matchConstraints, req)) return null;
	if (binding && binding.spec.matchResources && !resourceMatches({ resourceRules: [{ apiGroups: ["*"], apiVersions: ["*"], operations: ["*"], resources: ["*"] }], ...binding.spec.matchResources }, req)) return null;
	if (binding && binding.spec.matchResources && binding.spec.matchResources.resourceRules && !resourceMatches(binding.spec.matchResources, req)) return null;
	const vars = {
		object: req.object, oldObject: null, namespaceObject: req.namespaceObject || null, params: params || null,
		request: { operation: req.operation, namespace: req.object.metadata.namespace || "", name: req.object.metadata.name,
			userInfo: req.userInfo || {}, kind: { group: req.group, version: req.version, kind: req.object.kind } },
	};
	const variables = Object.fromEntries((spec.variables || []).map((v) => [v.name, v.expression]));
	for (const mc of spec.matchConditions || []) {
		// a match condition sees no variables (as in the API server and the webhook)
		const ok = cel.run(mc.expression, vars);
		if (ok !== true) return null;
	}
	let obj = clone(req.object);
	for (const m of spec.mutations || []) {
		// each mutation sees the object as the ones before left it
		const v = { ...vars, object: obj };
		if (m.patchType === "JSONPatch") {
			const ops = cel.run(m.jsonPatch.expression, v, variables);
			const next = jsonPatch(obj, ops);
			record(opts, obj, ops, next);
			obj = next;
		}
		else if (m.patchType === "ApplyConfiguration") obj = apply(obj, cel.run(m.applyConfiguration.expression, v, variables));
		else throw new Unsupported(`patchType ${m.patchType}`);
	}
	return obj;
}

// --- Kyverno ClusterPolicy -------------------------------------------------------
let jmespath = null;
function jp(expr, ctx) {
	if (!jmespath) jmespath = require("jmespath");
	if (/^\s*images\b/.test(expr)) throw new Unsupported("Kyverno's images variable");
	try {
		return jmespath.search(ctx, expr);
	} catch (e) {
		if (/Unknown function/.test(e.message)) throw new Unsupported(`Kyverno's JMESPath function: ${e.message}`);
		throw e;
	}
}
// {{ ... }}: a string that is one variable takes its value; one with text
// around takes the text of each (Kyverno's substitution)
function subst(x, ctx) {
	if (Array.isArray(x)) return x.map((y) => subst(y, ctx));
	if (isMap(x)) return Object.fromEntries(Object.entries(x).map(([k, v]) => [subst(k, ctx), subst(v, ctx)]));
	if (typeof x !== "string" || !x.includes("{{")) return x;
	if (/\{\{[^}]*\{\{/.test(x)) throw new Unsupported("nested {{ }} variables");
	const whole = /^\{\{\s*([^]*?)\s*\}\}$/.exec(x);
	if (whole && !whole[1].includes("{{")) {
		const v = jp(whole[1], ctx);
		if (v === null || v === undefined) throw new Error(`variable ${whole[1]} not resolved`);
		return v;
	}
	return x.replace(/\{\{\s*([^]*?)\s*\}\}/g, (all, e) => {
		const v = jp(e, ctx);
		if (v === null || v === undefined) throw new Error(`variable ${e} not resolved`);
		return typeof v === "string" ? v : JSON.stringify(v);
	});
}
function wildcard(pattern, s) {
	const re = new RegExp(`^${String(pattern).replace(/[.+^${}()|[\]\\]/g, "\\$&").replace(/\*/g, ".*").replace(/\?/g, ".")}$`);
	return re.test(String(s));
}
function condition(c, ctx) {
	const key = subst(c.key, ctx);
	const value = subst(c.value, ctx);
	const eq = (a, b) => (isMap(a) || Array.isArray(a) || isMap(b) || Array.isArray(b)) ? JSON.stringify(canon(a)) === JSON.stringify(canon(b))
		: typeof b === "string" && typeof a === "string" ? wildcard(b, a) : String(a) === String(b);
	const arr = (v) => (Array.isArray(v) ? v : [v]);
	switch (c.operator) {
	case "Equals": return eq(key, value);
	case "NotEquals": return !eq(key, value);
	case "In": case "AnyIn": return arr(key).some((k) => arr(value).some((v) => eq(k, v)));
	case "AllIn": return arr(key).every((k) => arr(value).some((v) => eq(k, v)));
	case "NotIn": case "AllNotIn": return arr(key).every((k) => !arr(value).some((v) => eq(k, v)));
	case "AnyNotIn": return arr(key).some((k) => !arr(value).some((v) => eq(k, v)));
	case "GreaterThan": return Number(key) > Number(value);
	case "GreaterThanOrEquals": return Number(key) >= Number(value);
	case "LessThan": return Number(key) < Number(value);
	case "LessThanOrEquals": return Number(key) <= Number(value);
	default: throw new Unsupported(`precondition operator ${c.operator}`);
	}
}
function conditions(pre, ctx) {
	if (!pre) return true;
	if (Array.isArray(pre)) return pre.every((c) => condition(c, ctx));
	if (pre.all && !pre.all.every((c) => condition(c, ctx))) return false;
	if (pre.any && !pre.any.some((c) => condition(c, ctx))) return false;
	return true;
}
function filterMatches(f, req) {
	const r = f.resources;
	if (!r) { if (f.subjects || f.roles || f.clusterRoles) throw new Unsupported("match on user info"); return true; }
	const kind = req.object.kind;
	if (r.kinds && !r.kinds.some((k) => k === kind || k.endsWith(`/${kind}`) || k === "*")) return false;
	if (r.operations && !r.operations.includes(req.operation)) return false;
	if (r.names && !r.names.some((n) => wildcard(n, req.object.metadata.name))) return false;
	if (r.name && !wildcard(r.name, req.object.metadata.name)) return false;
	if (r.namespaces && !r.namespaces.some((n) => wildcard(n, req.object.metadata.namespace || ""))) return false;
	if (r.annotations) throw new Unsupported("match on annotations");
	if (r.selector && !selects(r.selector, req.object.metadata.labels)) return false;
	if (r.namespaceSelector && !selects(r.namespaceSelector, req.namespaceObject && req.namespaceObject.metadata.labels)) return false;
	return true;
}
function block(b, req) {
	if (!b) return false;
	if (b.any) return b.any.some((f) => filterMatches(f, req));
	if (b.all) return b.all.every((f) => filterMatches(f, req));
	return filterMatches(b, req);
}

// The anchors of a patchStrategicMerge against the resource: +(k) adds k
// where the resource has none; a map whose (k) condition does not hold is
// dropped; a list element with conditions applies to each element of the
// resource's list that meets them (named by its merge key). Then the patch
// is a plain strategic merge patch.
const ANCHOR = /^([+<=X]?)\((.*)\)$/;
function matchesPattern(pattern, value) {
	if (isMap(pattern)) {
		if (!isMap(value)) return false;
		return Object.entries(pattern).every(([k, p]) => {
			const a = ANCHOR.exec(k);
			if (a) throw new Unsupported(`nested anchor ${k} in a condition`);
			return matchesPattern(p, value[k]);
		});
	}
	if (Array.isArray(pattern)) throw new Unsupported("a list in a condition");
	if (value === undefined || value === null) return pattern === null;
	if (typeof pattern === "string") {
		if (pattern === "?*") return value !== "" && value !== undefined;
		if (/^[<>!=]/.test(pattern) || pattern.includes("|")) throw new Unsupported(`pattern operator in ${pattern}`);
		return wildcard(pattern, typeof value === "string" ? value : JSON.stringify(value));
	}
	return String(pattern) === String(value);
}
function resolveAnchors(patch, res) {
	if (isMap(patch)) {
		const out = {};
		for (const [k, v] of Object.entries(patch)) {
			const a = ANCHOR.exec(k);
			if (!a) {
				const r = resolveAnchors(v, isMap(res) ? res[k] : undefined);
				// a list of conditions only patches nothing (it must not empty the list)
				if (!(Array.isArray(v) && v.length && Array.isArray(r) && !r.length)) out[k] = r;
				continue;
			}
			const [, kind, key] = a;
			if (kind === "+") {
				if (!isMap(res) || res[key] === undefined) out[key] = stripAnchors(v);
			} else if (kind === "") {
				if (!isMap(res) || !matchesPattern(v, res[key])) return undefined; // the whole map is skipped
			} else if (kind === "<") {
				if (!isMap(res) || !matchesPattern(v, res[key])) throw new GlobalSkip();
			} else throw new Unsupported(`anchor ${kind}(...)`);
		}
		return out;
	}
	if (Array.isArray(patch)) {
		const resList = Array.isArray(res) ? res : [];
		const out = [];
		for (const p of patch) {
			const conditional = hasCondition(p);
			if (!conditional) {
				const key = isMap(p) && mergeKeyOf([p]);
				const target = key ? resList.find((r) => isMap(r) && r[key] === p[key]) : undefined;
				const r = resolveAnchors(p, target);
				if (r !== undefined) out.push(r);
				continue;
			}
			// a global anchor holds where any element meets it
			let met = false;
			for (const r of resList) {
				let x;
				try { x = resolveAnchors(p, r); } catch (e) { if (e instanceof GlobalSkip) continue; throw e; }
				if (x === undefined) continue;
				met = true;
				if (!Object.keys(x).length) continue; // only conditions: nothing to patch
				const key = mergeKeyOf([r]);
				if (!key) throw new Unsupported("a conditional list element on a list without a merge key");
				out.push({ [key]: r[key], ...x });
			}
			if (!met && hasCondition(p, true)) throw new GlobalSkip();
		}
		return out;
	}
	return patch;
}
class GlobalSkip extends Error {}
// Has X a (k) or <(k) anchor anywhere (GLOBAL: a <(k) one)?
function hasCondition(x, global = false) {
	if (Array.isArray(x)) return x.some((y) => hasCondition(y, global));
	if (!isMap(x)) return false;
	return Object.entries(x).some(([k, v]) => {
		const a = ANCHOR.exec(k);
		if (a && (global ? a[1] === "<" : a[1] === "" || a[1] === "<")) return true;
		return hasCondition(v, global);
	});
}
function stripAnchors(x) {
	if (Array.isArray(x)) return x.map(stripAnchors);
	if (!isMap(x)) return x;
	return Object.fromEntries(Object.entries(x).map(([k, v]) => {
		const a = ANCHOR.exec(k);
		if (a && a[1] !== "+") throw new Unsupported(`anchor ${k} inside an added value`);
		return [a ? a[2] : k, stripAnchors(v)];
	}));
}

// Applies the patchStrategicMerge P to RES; MERGES collects each plain merge
// (for the referee)
function psm(res, p, merges) {
	let resolved;
	try {
		resolved = resolveAnchors(p, res);
	} catch (e) {
		if (e instanceof GlobalSkip) return res;
		throw e;
	}
	if (resolved === undefined) return res;
	const out = smp(res, resolved);
	if (merges) merges.push({ pod: clone(res), patch: clone(resolved), want: clone(out) });
	return out;
}

// Kyverno's JSON patch (paths made where an add lacks them); recorded for the referee
function kjp(obj, ops, opts) {
	const next = jsonPatch(obj, ops, true);
	record(opts, obj, ops, next);
	return next;
}
// Records a JSON patch for the referee; patches applied one after another
// are one patch (their operations in turn), so the referee runs once for them
function record(opts, obj, ops, next) {
	if (!opts.jsonPatches) return;
	const last = opts.jsonPatches[opts.jsonPatches.length - 1];
	if (last && last.ref === obj) {
		last.patch.push(...clone(ops));
		last.want = clone(next);
		last.ref = next;
	} else opts.jsonPatches.push({ pod: clone(obj), patch: clone(ops), want: clone(next), ref: next });
}

function clusterPolicy(policy, req, opts = {}) {
	const ann = (policy.metadata.annotations || {})["pod-policies.kyverno.io/autogen-controllers"];
	if (req.object.kind !== "Pod" && ann !== "none" && policy.spec.rules.some((r) => JSON.stringify(r.match || {}).includes('"Pod"'))) {
		throw new Unsupported("autogen: rules for Pods applied to a pod controller");
	}
	let obj = clone(req.object);
	let touched = false;
	for (const rule of policy.spec.rules) {
		if (!rule.mutate) continue;
		const r = { ...req, object: obj };
		if (!block(rule.match, r)) continue;
		if (rule.exclude && block(rule.exclude, r)) continue;
		const ctx = { request: { object: obj, operation: req.operation, namespace: obj.metadata.namespace || "", userInfo: req.userInfo || {} } };
		for (const c of rule.context || []) {
			if (c.apiCall) {
				// a GET of the request's namespace, the only call our policy makes
				const url = subst(c.apiCall.urlPath, ctx);
				if (url !== `/api/v1/namespaces/${obj.metadata.namespace}`) throw new Unsupported(`apiCall ${url}`);
				let v = req.namespaceObject ? jp(c.apiCall.jmesPath, req.namespaceObject) : null;
				if (v === null || v === undefined) v = c.apiCall.default;
				ctx[c.name] = v;
			} else if (c.variable) {
				let v = c.variable.value !== undefined ? subst(c.variable.value, ctx) : jp(subst(c.variable.jmesPath, ctx), ctx);
				if ((v === null || v === undefined) && c.variable.default !== undefined) v = c.variable.default;
				ctx[c.name] = v;
			} else throw new Unsupported(`context ${Object.keys(c).join(",")}`);
		}
		if (!conditions(rule.preconditions, ctx)) continue;
		const m = rule.mutate;
		if (m.targets || m.mutateExistingOnPolicyUpdate) throw new Unsupported("mutate existing");
		if (m.patchesJson6902) {
			obj = kjp(obj, YAML.parse(subst(m.patchesJson6902, ctx)), opts);
			touched = true;
		}
		if (m.patchStrategicMerge) {
			obj = psm(obj, subst(m.patchStrategicMerge, ctx), opts.merges);
			touched = true;
		}
		for (const fe of m.foreach || []) {
			if (fe.foreach) throw new Unsupported("nested foreach");
			if (fe.context) throw new Unsupported("foreach context");
			const list = jp(fe.list, ctx) || [];
			if (!Array.isArray(list)) throw new Error(`foreach list ${fe.list} is not a list`);
			const order = fe.order === "Descending" ? [...list.keys()].reverse() : [...list.keys()];
			for (const i of order) {
				const ectx = { ...ctx, element: list[i], elementIndex: i, request: { ...ctx.request, object: obj } };
				if (!conditions(fe.preconditions, ectx)) continue;
				if (fe.patchStrategicMerge) obj = psm(obj, subst(fe.patchStrategicMerge, ectx), opts.merges);
				if (fe.patchesJson6902) obj = kjp(obj, YAML.parse(subst(fe.patchesJson6902, ectx)), opts);
				touched = true;
			}
		}
	}
	return touched ? obj : null;
}

// --- our three ways ---------------------------------------------------------------
function request(pod, namespaces) {
	const ns = pod.metadata.namespace || "default";
	const namespaceObject = namespaces.find((n) => n.metadata.name === ns) || { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } };
	const object = clone(pod);
	object.metadata.namespace = ns;
	return { object, namespaceObject, operation: "CREATE", resource: "pods", group: "", version: "v1" };
}
function loadWay(way, file) {
	// GG_POLICY_FILE=WAY=FILE: another file for that way (the tests' installed copies)
	const over = /^(\w+)=(.+)$/.exec(process.env.GG_POLICY_FILE || "");
	if (!file && over && over[1] === way) file = over[2];
	const ds = docs(path.resolve(ROOT, file || WAYS[way]));
	return { policy: ds.find((d) => /Policy$/.test(d.kind)), binding: ds.find((d) => /Binding$/.test(d.kind)) };
}
// The pod as WAY admits it (unchanged where it does not apply)
function inject(way, pod, namespaces, opts = {}) {
	const { policy, binding } = opts.loaded || loadWay(way, opts.file);
	const req = request(pod, namespaces);
	let out;
	if (way === "ClusterPolicy") out = clusterPolicy(policy, req, opts);
	else if (way === "MutatingAdmissionPolicy") {
		if (!binding) throw new Error("the MutatingAdmissionPolicy comes without its binding");
		out = celPolicy(policy, req, binding, null, opts);
	} else out = celPolicy(policy, req, null, null, opts);
	const result = out || req.object;
	if (!pod.metadata.namespace) delete result.metadata.namespace;
	return result;
}

// Order-insensitive for lists of named objects, as the API server is.
function canon(x) {
	if (Array.isArray(x)) {
		const y = x.map(canon);
		if (y.length && y.every((e) => isMap(e) && (e.name !== undefined || e.mountPath !== undefined))) {
			y.sort((a, b) => String(a.name ?? a.mountPath).localeCompare(String(b.name ?? b.mountPath)) ||
				String(a.mountPath).localeCompare(String(b.mountPath)));
		}
		return y;
	}
	if (isMap(x)) return Object.fromEntries(Object.keys(x).sort().map((k) => [k, canon(x[k])]));
	return x;
}
function diff(a, b, at = "") {
	if (JSON.stringify(a) === JSON.stringify(b)) return null;
	if (a && b && typeof a === "object" && typeof b === "object") {
		for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) {
			const d = diff(a[k], b[k], `${at}.${k}`);
			if (d) return d;
		}
	}
	return `${at || "."}: ${JSON.stringify(a)} vs ${JSON.stringify(b)}`;
}

module.exports = { inject, loadWay, WAYS, canon, diff, smp, jsonPatch, celPolicy, clusterPolicy, request, docs, Unsupported, cel, clone, isMap };

// --- commands ---------------------------------------------------------------------
function preview(nsFile, files) {
	const namespaces = nsFile && nsFile !== "-" ? docs(nsFile).filter((d) => d.kind === "Namespace") : [];
	const out = [];
	// the pods of a file: Pods, the items of a List (kubectl get -o yaml),
	// and the pod a workload's template makes (Deployment, Job, ...)
	const podsOf = (d) => {
		if (!d || typeof d !== "object") return [];
		if (d.kind === "List") return (d.items || []).flatMap(podsOf);
		if (d.kind === "Pod") return [d];
		const t = d.spec && (d.spec.template || (d.spec.jobTemplate && d.spec.jobTemplate.spec && d.spec.jobTemplate.spec.template));
		if (!t || !t.spec) return [];
		const meta = { ...(t.metadata || {}), name: `${d.metadata.name}-pod` };
		if (d.metadata.namespace) meta.namespace = d.metadata.namespace;
		return [{ apiVersion: "v1", kind: "Pod", metadata: meta, spec: t.spec }];
	};
	for (const f of files) {
		const pods = docs(f).flatMap(podsOf);
		if (!pods.length) throw new Error(`${f}: no Pod, List of pods or workload with a pod template`);
		for (const pod of pods) {
			// as if its namespace opted in, where no namespace file says otherwise
			const ns = namespaces.length ? namespaces : [{ apiVersion: "v1", kind: "Namespace",
				metadata: { name: pod.metadata.namespace || "default", labels: { "gpuguard.io/inject": "true" } } }];
			for (const way of Object.keys(WAYS)) {
				const p = inject(way, pod, ns);
				p.metadata.annotations = { ...(p.metadata.annotations || {}), "gpuguard.io/injected-by": way };
				out.push(YAML.stringify(p, { lineWidth: 0 }));
			}
		}
	}
	process.stdout.write(out.map((d) => `---\n${d}`).join(""));
}

// Every copy of the GPU resource list in FILES (CEL `k in [...]` and
// startsWith, JMESPath contains(`[...]`, @) and starts_with) is the list of
// the MutatingAdmissionPolicy's variables gpuResources and gpuResourcePrefixes
function gpuLists(files) {
	const map = loadWay("MutatingAdmissionPolicy").policy;
	const v = Object.fromEntries(map.spec.variables.map((x) => [x.name, x.expression]));
	const names = cel.run(v.gpuResources, {}), prefixes = cel.run(v.gpuResourcePrefixes, {});
	const want = JSON.stringify([[...names].sort(), [...prefixes].sort()]);
	for (const f of files) {
		const text = fs.readFileSync(f, "utf8").replace(/\n\s*/g, " ");
		const lists = [...text.matchAll(/\bk in (\[[^\]]*\])/g)].map((x) => cel.run(x[1], {}))
			.concat([...text.matchAll(/contains\(`(\[[^\]]*\])`, @\)/g)].map((x) => JSON.parse(x[1])));
		const pre = [...text.matchAll(/(?:k\.startsWith\(|starts_with\(@, )'{1,2}([^']*)'{1,2}\)/g)].map((x) => x[1]);
		const n = `the GPU resources of ${f} are the MutatingAdmissionPolicy's variables`;
		if (!lists.length || !pre.length) { console.log(`FAIL ${n}: no copy found`); continue; }
		const bad = lists.map((l) => JSON.stringify([[...l].sort(), [...new Set(pre)].sort()])).filter((x) => x !== want);
		console.log(bad.length ? `FAIL ${n}: ${bad[0]}, not ${want}` : `ok ${n} (${lists.length} copies)`);
	}
}

// The MutatingPolicy A and the MutatingAdmissionPolicy B say the same: the
// same match conditions, variables, mutations, failure and reinvocation
// policies, to the text
function sameCel(a, b) {
	const pa = docs(a).find((d) => /Policy$/.test(d.kind)), pb = docs(b).find((d) => /Policy$/.test(d.kind));
	const pick = (p) => ["matchConditions", "variables", "mutations", "failurePolicy", "reinvocationPolicy"].map((k) => p.spec[k]);
	const d = diff(pick(pa), pick(pb));
	const n = `${a} and ${b} have the same CEL`;
	console.log(d ? `FAIL ${n}: ${d.slice(0, 300)}` : `ok ${n}`);
}

// The webhook's match conditions of each policy file: true for a pod that
// asks for a GPU in any of the ways, false (never an error, which
// failurePolicy Fail would turn into a refusal) for everything else
function matchConditions(files) {
	const pod = (res, extra = {}) => ({ apiVersion: "v1", kind: "Pod", metadata: { name: "p" },
		spec: { containers: [{ name: "a", image: "x" }, { name: "b", image: "x", ...(res ? { resources: res } : {}) }], ...extra } });
	const shapes = [
		["no object (a DELETE)", null, false], ["a pods/binding Binding", { apiVersion: "v1", kind: "Binding", target: { name: "n" } }, false],
		["a pod without containers", { apiVersion: "v1", kind: "Pod", metadata: { name: "p" }, spec: {} }, false],
		["a pod with no resources", pod(undefined), false], ["a pod asking for cpu only", pod({ limits: { cpu: "1" } }), false],
		["a pod asking for example.com/fpga", pod({ limits: { "example.com/fpga": 1 } }), false],
		["nvidia.com/gpu", pod({ limits: { "nvidia.com/gpu": 1 } }), true], ["amd.com/gpu", pod({ limits: { "amd.com/gpu": 1 } }), true],
		["nvidia.com/gpu.shared", pod({ limits: { "nvidia.com/gpu.shared": 1 } }), true],
		["nvidia.com/mig-3g.40gb", pod({ limits: { "nvidia.com/mig-3g.40gb": 1 } }), true],
		["a DRA claim", pod({ claims: [{ name: "gpu" }] }, { resourceClaims: [{ name: "gpu", resourceClaimTemplateName: "t" }] }), true],
	];
	for (const f of files) {
		const p = docs(f).find((d) => /Policy$/.test(d.kind));
		const mcs = p.spec.matchConditions || (p.spec.webhookConfiguration || {}).matchConditions || [];
		if (!mcs.length) { console.log(`FAIL match conditions of ${f}: none`); continue; }
		for (const [what, object, want] of shapes) {
			const n = `match conditions of ${f} on ${what}: ${want}`;
			try {
				const got = mcs.every((mc) => cel.run(mc.expression, { object, oldObject: null, request: { operation: "CREATE" } }) === true);
				console.log(got === want ? `ok ${n}` : `FAIL ${n}: ${got}`);
			} catch (e) {
				console.log(`FAIL ${n}: an error (${e.message}), which refuses the request`);
			}
		}
	}
}

// The referee's input: a kustomization applying B.patch.json to B.pod.json as
// a strategic merge patch (what Kyverno's patchStrategicMerge runs)
function kustomizeDir(b, dir) {
	const pod = JSON.parse(fs.readFileSync(`${b}.pod.json`, "utf8"));
	const patch = JSON.parse(fs.readFileSync(`${b}.patch.json`, "utf8"));
	patch.apiVersion = pod.apiVersion;
	patch.kind = pod.kind;
	patch.metadata = { ...(patch.metadata || {}), name: pod.metadata.name };
	if (pod.metadata.namespace) patch.metadata.namespace = pod.metadata.namespace;
	fs.mkdirSync(dir, { recursive: true });
	fs.writeFileSync(path.join(dir, "pod.yaml"), YAML.stringify(pod));
	fs.writeFileSync(path.join(dir, "patch.yaml"), YAML.stringify(patch));
	fs.writeFileSync(path.join(dir, "kustomization.yaml"), "resources: [pod.yaml]\npatches:\n  - path: patch.yaml\n");
}
// "ok"/"FAIL" line: are the objects of files A and B the same (any-order:
// lists of named objects in any order; exact: to the order of every list)?
function same(a, b, how) {
	const load = (f) => {
		if (!fs.existsSync(f)) throw new Error(`${f}: Kubernetes' result is missing`);
		return docs(f)[0];
	};
	const sortKeys = (x) => Array.isArray(x) ? x.map(sortKeys) : isMap(x) ? Object.fromEntries(Object.keys(x).sort().map((k) => [k, sortKeys(x[k])])) : x;
	const norm = how === "exact" ? sortKeys : canon;
	const d = diff(norm(load(a)), norm(load(b)));
	const n = `${path.basename(a)} is ${path.basename(b)} (${how})`;
	console.log(d ? `FAIL ${n}: ${d}` : `ok ${n}`);
}

if (require.main === module) {
	const [cmd, ...args] = process.argv.slice(2);
	try {
		if (cmd === "preview") preview(args[0], args.slice(1));
		else if (cmd === "corpus") require("./corpus.cjs").main(args);
		else if (cmd === "plain") require("./corpus.cjs").plain(args);
		else if (cmd === "kyverno-cases") require("./kyverno-cases.cjs").main(args);
		else if (cmd === "kustomize-dir") kustomizeDir(args[0], args[1]);
		else if (cmd === "same") same(args[0], args[1], args[2]);
		else if (cmd === "same-all") {
			// the referee's verdicts in DIR, each model result against Kubernetes'
			const dir = args[0];
			for (const f of fs.readdirSync(dir).filter((x) => /\.want\.json$/.test(x)).sort()) {
				const b = path.join(dir, f.replace(/\.want\.json$/, ""));
				if (/^merge-/.test(f)) {
					same(`${b}.want.json`, `${b}.kubectl.json`, "any-order");
					same(`${b}.want.json`, `${b}.kz.yaml`, "exact");
				} else same(`${b}.want.json`, `${b}.kubectl.json`, "exact");
			}
		}
		else if (cmd === "gpu-lists") gpuLists(args);
		else if (cmd === "same-cel") sameCel(args[0], args[1]);
		else if (cmd === "match-conditions") matchConditions(args);
		else if (cmd === "api-rules") {
			// the API server's rules on every Pod and pod template of the files
			const { apiRules } = require("./corpus.cjs");
			for (const f of args) for (const d of docs(f)) {
				const pod = d.kind === "Pod" ? d : d.spec && d.spec.template ? d.spec.template : null;
				if (!pod) continue;
				const e = apiRules(pod);
				const n = `the API server's rules on ${f} (${d.kind} ${d.metadata.name})`;
				console.log(e.length ? `FAIL ${n}: ${e.join("; ")}` : `ok ${n}`);
			}
		}
		else {
			console.error("usage: inject.cjs preview NAMESPACES|- POD.yaml... | corpus NAMESPACES PATCHDIR POD.yaml... | kyverno-cases DIR");
			process.exit(2);
		}
	} catch (e) {
		console.error(`inject.cjs: ${e.message}`);
		process.exit(1);
	}
}
