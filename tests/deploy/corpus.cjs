// gpuguard: every way in (deploy/policy/) on every pod of the corpus
// (tests/deploy/corpus/), through the model of inject.cjs. One line per check:
// "ok NAME" or "FAIL NAME: WHY". Checks, for each pod:
//   - the three ways give the same pod;
//   - it is a pod the API server takes: one handler per probe and hook, unique
//     names of containers, volumes and (per container) ports, each mount of a
//     volume the pod has and at a path of its own, one of value/valueFrom;
//   - the pod is as its author wrote it: every field of each container and of
//     the pod kept (env and mounts kept in order, ours after them), probes
//     and hooks untouched, no LD_PRELOAD set or changed, fsGroup kept;
//   - the GPU containers (found here by our own reading of the resources, not
//     the policies') get the library through /etc/ld.so.preload, the limit
//     the annotations ask for, and a check where they have room for one;
//     the other containers are untouched;
//   - what is injected passes Pod Security "restricted", and so does the
//     whole pod where the pod did;
//   - the same pod opted out, in a namespace not opted in, with no GPU, or
//     injected already, is left alone by every way.
// Writes each injected pod to OUTDIR/<pod>.<way>.yaml (for the schema check),
// each strategic merge the ClusterPolicy model made to
// OUTDIR/merge-N.{pod,patch,want}.json and each JSON patch the
// MutatingAdmissionPolicy's and the ClusterPolicy's made to
// OUTDIR/jsonpatch-N.*, for the referee (kubectl patch).
"use strict";
const fs = require("fs");
const path = require("path");
const YAML = require("yaml");
const m = require("./inject.cjs");
const { pssViolations } = require("./validate.cjs");

const out = [];
const ok = (n) => out.push(`ok ${n}`);
const fail = (n, why) => out.push(`FAIL ${n}: ${why}`);
const check = (n, errs) => (errs.length ? fail(n, errs.slice(0, 4).join("; ")) : ok(n));
const isMap = m.isMap;
const json = (x) => JSON.stringify(x);

// our own reading of "gets a GPU", independent of the policies' text
const GPU_NAMES = ["nvidia.com/gpu", "amd.com/gpu", "nvidia.com/gpu.shared"];
const gpuOf = (c) => {
	const r = c.resources || {};
	if ((r.claims || []).length) return true;
	return Object.keys(r.limits || {}).some((k) => GPU_NAMES.includes(k) || /^nvidia\.com\/mig-\d+g\.\d+gb$/.test(k));
};
const HANDLERS = ["exec", "httpGet", "tcpSocket", "grpc"];
const HOOK_HANDLERS = ["exec", "httpGet", "tcpSocket", "sleep"];
const OUR_ENV = new Set(["GPUGUARD_LIMIT", "GPUGUARD_SHARED", "GPUGUARD_SHARED_MODE", "GPUGUARD_DUMP_DIR",
	"GPUGUARD_POD_NAMESPACE", "GPUGUARD_POD_NAME", "GPUGUARD_CONTAINER_NAME"]);
const OUR_MOUNTS = new Set(["/opt/gpuguard", "/etc/ld.so.preload", "/run/gpuguard", "/var/lib/gpuguard/dumps"]);
const CHECK = ["/opt/gpuguard/bin/gpuguard", "check"];

// The API server's rules that kill pods in practice.
function apiRules(pod) {
	const e = [];
	const s = pod.spec;
	const all = [...(s.initContainers || []), ...(s.containers || []), ...(s.ephemeralContainers || [])];
	const dup = (xs) => xs.filter((x, i) => xs.indexOf(x) !== i);
	for (const n of dup(all.map((c) => c.name))) e.push(`container name ${n} twice`);
	const vols = (s.volumes || []).map((v) => v.name);
	for (const n of dup(vols)) e.push(`volume name ${n} twice`);
	for (const v of s.volumes || []) {
		const kinds = Object.keys(v).filter((k) => k !== "name");
		if (kinds.length !== 1) e.push(`volume ${v.name} has ${kinds.length} sources`);
	}
	for (const c of all) {
		const at = `container ${c.name}`;
		for (const p of ["startupProbe", "livenessProbe", "readinessProbe"]) {
			if (!c[p]) continue;
			const h = HANDLERS.filter((x) => c[p][x] !== undefined);
			if (h.length !== 1) e.push(`${at}: ${p} has ${h.length} handlers (${h.join(", ")})`);
		}
		for (const hook of ["postStart", "preStop"]) {
			const x = c.lifecycle && c.lifecycle[hook];
			if (!x) continue;
			const h = HOOK_HANDLERS.filter((k) => x[k] !== undefined);
			if (h.length !== 1) e.push(`${at}: ${hook} has ${h.length} handlers`);
		}
		const ports = c.ports || [];
		for (const n of dup(ports.filter((p) => p.name).map((p) => p.name))) e.push(`${at}: port name ${n} twice`);
		for (const p of ports) if (p.name && (p.name.length > 15 || !/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(p.name))) e.push(`${at}: port name ${p.name} is not IANA_SVC_NAME`);
		for (const n of dup(ports.map((p) => `${p.containerPort}/${p.protocol || "TCP"}`))) e.push(`${at}: port ${n} twice`);
		const mounts = c.volumeMounts || [];
		for (const mp of dup(mounts.map((x) => x.mountPath))) e.push(`${at}: mountPath ${mp} twice`);
		for (const x of mounts) if (!vols.includes(x.name)) e.push(`${at}: mounts volume ${x.name}, which the pod has not`);
		for (const v of c.env || []) if ((v.value !== undefined) + (v.valueFrom !== undefined) > 1) e.push(`${at}: env ${v.name} has value and valueFrom`);
		if (c.restartPolicy !== undefined && !(s.initContainers || []).includes(c)) e.push(`${at}: restartPolicy on a regular container`);
	}
	return e;
}

// Is WANT (the author's) kept in GOT? Lists of named things: each element
// kept, in order; ours may follow.
function kept(want, got, at, e, ignore = new Set()) {
	if (isMap(want)) {
		if (!isMap(got)) { e.push(`${at} is gone`); return; }
		for (const [k, v] of Object.entries(want)) if (!ignore.has(k)) kept(v, got[k], `${at}.${k}`, e);
		return;
	}
	if (Array.isArray(want) && !want.length) return; // nothing of the author's to keep
	if (Array.isArray(want) && Array.isArray(got) && want.every(isMap) && want.every((x) => x.name !== undefined || x.mountPath !== undefined)) {
		if (json(got.slice(0, want.length)) !== json(want)) e.push(`${at}: the author's entries are not kept first and as they were`);
		return;
	}
	if (json(want) !== json(got)) e.push(`${at}: ${json(want)} became ${json(got)}`);
}

function author(orig, pod, ns) {
	const e = [];
	kept(orig.metadata, pod.metadata, "metadata", e, new Set(["namespace"]));
	const so = orig.spec, sp = pod.spec;
	kept(so, sp, "spec", e, new Set(["containers", "initContainers", "volumes", "securityContext"]));
	kept(so.volumes || [], sp.volumes || [], "spec.volumes", e);
	kept(so.initContainers || [], (sp.initContainers || []).slice(0, (so.initContainers || []).length), "spec.initContainers", e);
	const psc = so.securityContext || {};
	kept(psc, sp.securityContext || {}, "spec.securityContext", e);
	const rsc = sp.securityContext || {};
	if (psc.fsGroup !== undefined && (rsc.fsGroupChangePolicy || null) !== (psc.fsGroupChangePolicy || null)) e.push("fsGroupChangePolicy added to the pod's own fsGroup");
	if (psc.fsGroup === undefined && (rsc.fsGroup !== 65532 || rsc.fsGroupChangePolicy !== (psc.fsGroupChangePolicy || "OnRootMismatch"))) {
		e.push(`fsGroup ${rsc.fsGroup} with fsGroupChangePolicy ${rsc.fsGroupChangePolicy}: not 65532 with OnRootMismatch`);
	}
	if (so.containers.length !== sp.containers.length) e.push("containers added or removed");
	for (const [i, c] of so.containers.entries()) {
		const r = sp.containers[i];
		const at = `container ${c.name}`;
		if (!r || r.name !== c.name) { e.push(`${at} moved`); continue; }
		kept(c, r, at, e, new Set(["env", "volumeMounts", "lifecycle"]));
		kept(c.env || [], r.env || [], `${at}.env`, e);
		kept(c.volumeMounts || [], r.volumeMounts || [], `${at}.volumeMounts`, e);
		kept(c.lifecycle || {}, r.lifecycle || {}, `${at}.lifecycle`, e);
		const ld = (x) => (x.env || []).filter((v) => v.name === "LD_PRELOAD");
		if (json(ld(c)) !== json(ld(r))) e.push(`${at}: LD_PRELOAD ${json(ld(c))} became ${json(ld(r))}`);
		if (!gpuOf(c)) {
			if (json(c) !== json(r)) e.push(`${at} has no GPU and was changed`);
			continue;
		}
		// what a GPU container gets
		const ours = (r.env || []).filter((v) => OUR_ENV.has(v.name));
		const limit = ((orig.metadata.annotations || {})["gpuguard.io/limit"]) || ((ns.metadata.annotations || {})["gpuguard.io/limit"]) || "20Gi";
		const env = Object.fromEntries(ours.map((v) => [v.name, v.value]));
		if (env.GPUGUARD_LIMIT !== limit) e.push(`${at}: GPUGUARD_LIMIT ${env.GPUGUARD_LIMIT}, not ${limit}`);
		if (env.GPUGUARD_CONTAINER_NAME !== c.name) e.push(`${at}: GPUGUARD_CONTAINER_NAME ${env.GPUGUARD_CONTAINER_NAME}`);
		if (env.GPUGUARD_SHARED !== "/run/gpuguard/pod") e.push(`${at}: GPUGUARD_SHARED ${env.GPUGUARD_SHARED}`);
		const pre = (r.volumeMounts || []).find((x) => x.mountPath === "/etc/ld.so.preload");
		if (!pre || pre.name !== "gpuguard-bin" || pre.subPath !== "ld.so.preload" || pre.readOnly !== true) e.push(`${at}: /etc/ld.so.preload is not gpuguard-bin's ld.so.preload, read-only: ${json(pre)}`);
		for (const mp of OUR_MOUNTS) if (!(r.volumeMounts || []).some((x) => x.mountPath === mp)) e.push(`${at}: no mount at ${mp}`);
		// fail closed: our probe where it has none; our hook where it has a
		// probe but no hook; nothing where it has both (and then theirs stay)
		const ourProbe = r.startupProbe && json(r.startupProbe.exec && r.startupProbe.exec.command) === json(CHECK);
		const ourHook = r.lifecycle && r.lifecycle.postStart && json(r.lifecycle.postStart.exec && r.lifecycle.postStart.exec.command) === json(CHECK);
		if (!c.startupProbe) { if (!ourProbe) e.push(`${at}: no startup probe of its own, and none of ours`); }
		else if (!(c.lifecycle && c.lifecycle.postStart)) { if (!ourHook) e.push(`${at}: its own startup probe, no postStart hook, and none of ours`); }
		if (c.startupProbe && ourProbe) e.push(`${at}: its startup probe was replaced`);
		if (r.terminationMessagePolicy === undefined) e.push(`${at}: no terminationMessagePolicy`);
	}
	const gpu = so.containers.filter(gpuOf).length;
	if (!gpu) e.push("the corpus pod has no GPU container by our reading");
	for (const n of ["gpuguard-install", "gpuguard-metrics"]) if (!(sp.initContainers || []).some((c) => c.name === n)) e.push(`no ${n}`);
	if ((pod.metadata.labels || {})["gpuguard.io/injected"] !== "true") e.push("no label gpuguard.io/injected");
	return e;
}

const sortKeys = (x) => Array.isArray(x) ? x.map(sortKeys) : isMap(x) ? Object.fromEntries(Object.keys(x).sort().map((k) => [k, sortKeys(x[k])])) : x;

// ARGS: [--policy WAY=FILE]... NAMESPACES OUTDIR POD.yaml...
function main(args) {
	const files = {};
	while (args[0] === "--policy") {
		const [way, file] = args[1].split("=");
		if (!m.WAYS[way]) throw new Error(`no way ${way}`);
		files[way] = file;
		args = args.slice(2);
	}
	const [nsFile, outDir, ...pods] = args;
	const namespaces = m.docs(nsFile).filter((d) => d.kind === "Namespace");
	fs.mkdirSync(outDir, { recursive: true });
	const loaded = Object.fromEntries(Object.keys(m.WAYS).map((w) => [w, m.loadWay(w, files[w])]));
	const merges = [], jsonPatches = [];
	for (const file of pods) {
		for (const orig of m.docs(file).filter((d) => d.kind === "Pod")) {
			const base = path.basename(file, ".yaml");
			const ns = namespaces.find((n) => n.metadata.name === orig.metadata.namespace);
			if (!ns) { fail(`corpus ${base}`, `no namespace ${orig.metadata.namespace} in ${nsFile}`); continue; }
			const res = {};
			for (const way of Object.keys(m.WAYS)) {
				const name = `${base} by ${way}`;
				try {
					res[way] = m.inject(way, orig, namespaces, { loaded: loaded[way], merges: way === "ClusterPolicy" ? merges : null,
						jsonPatches: way === "MutatingPolicy" ? null : jsonPatches });
				} catch (e) {
					fail(name, `the model: ${e.message}`);
					continue;
				}
				const pod = res[way];
				fs.writeFileSync(path.join(outDir, `${base}.${way}.yaml`), YAML.stringify(pod));
				check(`${name}: the API server's rules`, apiRules(pod));
				check(`${name}: as its author wrote it, with gpuguard`, author(orig, pod, ns));
				const injected = new Set([...(pod.spec.initContainers || []).map((c) => c.name)].filter((n) => n.startsWith("gpuguard-")));
				check(`${name}: pss-restricted what it injects`, pssViolations(pod.spec, "restricted", injected));
				if (!pssViolations(orig.spec, "restricted").length) check(`${name}: pss-restricted the whole pod`, pssViolations(pod.spec, "restricted"));
			}
			// the same pod, to the order of every list
			const ways = Object.keys(res);
			for (const w of ways.slice(1)) {
				const d = m.diff(sortKeys(res[ways[0]]), sortKeys(res[w]));
				if (d) fail(`${base}: ${w} gives what ${ways[0]} gives`, d);
				else ok(`${base}: ${w} gives what ${ways[0]} gives`);
			}
			// pods every way must leave alone
			const variants = [];
			const out1 = m.clone(orig);
			out1.metadata.labels = { ...(out1.metadata.labels || {}), "gpuguard.io/inject": "false" };
			variants.push(["opted out", out1, namespaces]);
			variants.push(["in a namespace not opted in", orig, namespaces.map((n) => n.metadata.name === ns.metadata.name ? { ...n, metadata: { ...n.metadata, labels: {} } } : n)]);
			const nogpu = m.clone(orig);
			for (const c of nogpu.spec.containers) if (c.resources) {
				for (const k of Object.keys(c.resources.limits || {})) if (!/^(cpu|memory|ephemeral-storage)$/.test(k)) { delete c.resources.limits[k]; delete (c.resources.requests || {})[k]; }
				delete c.resources.claims;
			}
			variants.push(["with no GPU", nogpu, namespaces]);
			const again = m.clone(res[ways[0]] || orig);
			variants.push(["injected already", again, namespaces]);
			// the same pod with no securityContext of its own: injected as well
			const bare = m.clone(orig);
			delete bare.spec.securityContext;
			const got = {};
			for (const way of Object.keys(m.WAYS)) {
				const n = `${base} with no pod securityContext by ${way}`;
				try {
					got[way] = m.inject(way, bare, namespaces, { loaded: loaded[way] });
					check(`${n}: the API server's rules, as its author wrote it`, [...apiRules(got[way]), ...author(bare, got[way], ns)]);
				} catch (e) {
					fail(n, `the model: ${e.message}`);
				}
			}
			for (const w of Object.keys(got).slice(1)) {
				const d = m.diff(sortKeys(got[Object.keys(got)[0]]), sortKeys(got[w]));
				if (d) fail(`${base} with no pod securityContext: ${w} gives what the others give`, d);
				else ok(`${base} with no pod securityContext: ${w} gives what the others give`);
			}
			for (const [what, pod, nss] of variants) {
				for (const way of Object.keys(m.WAYS)) {
					const n = `${base} ${what}: ${way} leaves it alone`;
					try {
						const r = m.inject(way, pod, nss, { loaded: loaded[way] });
						const d = m.diff(m.canon(r), m.canon(pod));
						if (d) fail(n, d);
						else ok(n);
					} catch (e) {
						fail(n, `the model: ${e.message}`);
					}
				}
			}
		}
	}
	merges.forEach((x, i) => {
		for (const k of ["pod", "patch", "want"]) fs.writeFileSync(path.join(outDir, `merge-${i}.${k}.json`), JSON.stringify(x[k]));
	});
	jsonPatches.forEach((x, i) => {
		for (const k of ["pod", "patch", "want"]) fs.writeFileSync(path.join(outDir, `jsonpatch-${i}.${k}.json`), JSON.stringify(x[k]));
	});
	console.log(out.join("\n"));
}

// Each way, applied to the pod APP, gives the pod PLAIN (deploy/plain/pod.yaml)
function plain([nsFile, appFile, plainFile, ...policy]) {
	const namespaces = m.docs(nsFile).filter((d) => d.kind === "Namespace");
	const app = m.docs(appFile).find((d) => d.kind === "Pod");
	const want = m.docs(plainFile).find((d) => d.kind === "Pod");
	const files = Object.fromEntries(policy.map((x) => x.split("=")));
	for (const way of Object.keys(m.WAYS)) {
		const n = `${way} applied to ${appFile} is ${plainFile}`;
		try {
			const d = m.diff(sortKeys(m.inject(way, app, namespaces, { file: files[way] })), sortKeys(want));
			if (d) fail(n, d);
			else ok(n);
		} catch (e) {
			fail(n, `the model: ${e.message}`);
		}
	}
	console.log(out.join("\n"));
}

module.exports = { main, plain, apiRules, sortKeys };
