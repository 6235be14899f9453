// gpuguard: a small evaluator for the subset of CEL (https://github.com/google/cel-spec)
// that Kubernetes' MutatingAdmissionPolicy and Kyverno's MutatingPolicy use in
// deploy/policy/: literals, lists and maps, field selection and indexing, the
// optional forms (a.?b, a[?k], orValue, hasValue), has(), the macros all,
// exists, exists_one, map and filter, the string and list functions
// Kubernetes adds (startsWith, indexOf, ...), and object construction
// (Object.spec{...}, JSONPatch{...}), which gives plain objects. Anything else
// throws an Unsupported error naming it, so a caller can count what it does
// not model. Checked against Kyverno's own test cases of both kinds
// (tests/deploy/inject.cjs kyverno-cases), not only against our policies.
"use strict";

class Unsupported extends Error {}
class CelError extends Error {}

// --- lexer --------------------------------------------------------------------
const PUNCT = ["?.", "==", "!=", "<=", ">=", "&&", "||", "[?", "(", ")", "[", "]", "{", "}", ",", ".", ":", "?", "!",
	"<", ">", "+", "-", "*", "/", "%"];
function lex(src) {
	const toks = [];
	let i = 0;
	while (i < src.length) {
		const ch = src[i];
		if (/\s/.test(ch)) { i++; continue; }
		if (src.startsWith("//", i)) { while (i < src.length && src[i] !== "\n") i++; continue; }
		let m;
		if ((m = /^(?:[rR]?)('''|"""|'|")/.exec(src.slice(i, i + 4)))) {
			const raw = /^[rR]/.test(src[i]);
			const q = m[1];
			let j = i + (raw ? 1 : 0) + q.length;
			let s = "";
			for (;;) {
				if (j >= src.length) throw new CelError("unterminated string");
				if (src.startsWith(q, j)) { j += q.length; break; }
				if (src[j] === "\\" && !raw) {
					const e = src[j + 1];
					const map = { n: "\n", t: "\t", r: "\r", "\\": "\\", "'": "'", '"': '"', "`": "`", "?": "?", a: "\x07", b: "\b", f: "\f", v: "\v" };
					if (e in map) { s += map[e]; j += 2; continue; }
					throw new Unsupported(`string escape \\${e}`);
				}
				s += src[j++];
			}
			toks.push({ t: "str", v: s });
			i = j;
			continue;
		}
		if ((m = /^(?:0x[0-9a-fA-F]+|\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)u?/.exec(src.slice(i)))) {
			const text = m[0].replace(/u$/, "");
			toks.push({ t: "num", v: Number(text) });
			i += m[0].length;
			continue;
		}
		if ((m = /^[A-Za-z_][A-Za-z0-9_]*/.exec(src.slice(i)))) {
			toks.push({ t: "id", v: m[0] });
			i += m[0].length;
			continue;
		}
		const p = PUNCT.find((x) => src.startsWith(x, i));
		if (!p) throw new CelError(`unexpected character ${JSON.stringify(ch)}`);
		// "?." only as ".?" is CEL's; a "?" followed by "." would be a ternary
		if (p === "?.") { toks.push({ t: "?" }); i += 1; continue; }
		toks.push({ t: p });
		i += p.length;
	}
	toks.push({ t: "eof" });
	return toks;
}

// --- parser -------------------------------------------------------------------
function parse(src) {
	const toks = lex(src);
	let k = 0;
	const peek = (o = 0) => toks[k + o];
	const eat = (t) => {
		if (toks[k].t !== t) throw new CelError(`expected ${t}, got ${toks[k].t}${toks[k].v !== undefined ? " " + toks[k].v : ""}`);
		return toks[k++];
	};
	const accept = (t) => (toks[k].t === t ? toks[k++] : null);
	function expr() {
		const c = or();
		if (accept("?")) {
			const a = expr();
			eat(":");
			const b = expr();
			return { n: "cond", c, a, b };
		}
		return c;
	}
	function or() {
		let l = and();
		while (accept("||")) l = { n: "or", l, r: and() };
		return l;
	}
	function and() {
		let l = rel();
		while (accept("&&")) l = { n: "and", l, r: rel() };
		return l;
	}
	function rel() {
		let l = add();
		for (;;) {
			const t = peek();
			if (["==", "!=", "<", "<=", ">", ">="].includes(t.t)) { k++; l = { n: "bin", op: t.t, l, r: add() }; }
			else if (t.t === "id" && t.v === "in") { k++; l = { n: "bin", op: "in", l, r: add() }; }
			else return l;
		}
	}
	function add() {
		let l = mul();
		while (peek().t === "+" || peek().t === "-") { const op = toks[k++].t; l = { n: "bin", op, l, r: mul() }; }
		return l;
	}
	function mul() {
		let l = unary();
		while (["*", "/", "%"].includes(peek().t)) { const op = toks[k++].t; l = { n: "bin", op, l, r: unary() }; }
		return l;
	}
	function unary() {
		if (accept("!")) return { n: "not", x: unary() };
		if (accept("-")) return { n: "neg", x: unary() };
		return member();
	}
	const qualified = (x) => x.n === "id" ? x.v : x.n === "sel" && !x.opt ? (qualified(x.x) && `${qualified(x.x)}.${x.f}`) : null;
	function member() {
		let x = primary();
		for (;;) {
			if (accept(".")) {
				const opt = !!accept("?");
				const f = eat("id").v;
				if (!opt && peek().t === "(") {
					k++;
					x = { n: "call", f, target: x, args: args(")") };
				} else x = { n: "sel", x, f, opt };
			} else if (peek().t === "[" || peek().t === "[?") {
				const opt = toks[k++].t === "[?";
				const i = expr();
				eat("]");
				x = { n: "idx", x, i, opt };
			} else if (peek().t === "{" && qualified(x)) {
				k++;
				const fields = [];
				while (!accept("}")) {
					const opt = !!accept("?");
					const f = eat("id").v;
					eat(":");
					fields.push({ f, opt, v: expr() });
					if (!accept(",")) { eat("}"); break; }
				}
				x = { n: "struct", type: qualified(x), fields };
			} else return x;
		}
	}
	function args(close) {
		const a = [];
		while (!accept(close)) {
			a.push(expr());
			if (!accept(",")) { eat(close); break; }
		}
		return a;
	}
	function primary() {
		const t = toks[k++];
		switch (t.t) {
		case "num": return { n: "lit", v: t.v };
		case "str": return { n: "lit", v: t.v };
		case "(": { const e = expr(); eat(")"); return e; }
		case "[": return { n: "list", items: args("]") };
		case "{": {
			const entries = [];
			while (!accept("}")) {
				const opt = !!accept("?");
				const key = expr();
				eat(":");
				entries.push({ key, opt, v: expr() });
				if (!accept(",")) { eat("}"); break; }
			}
			return { n: "map", entries };
		}
		case ".": return primary();
		case "id":
			if (t.v === "true" || t.v === "false") return { n: "lit", v: t.v === "true" };
			if (t.v === "null") return { n: "lit", v: null };
			if (peek().t === "(") { k++; return { n: "call", f: t.v, args: args(")") }; }
			return { n: "id", v: t.v };
		default: throw new CelError(`unexpected ${t.t}`);
		}
	}
	const e = expr();
	eat("eof");
	return e;
}

// --- values -------------------------------------------------------------------
class Opt {
	constructor(has, v) { this.has = has; this.v = v; }
}
const NONE = new Opt(false, undefined);
const isMap = (x) => x !== null && typeof x === "object" && !Array.isArray(x) && !(x instanceof Opt);
function equal(a, b) {
	if (a === b) return true;
	if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => equal(x, b[i]));
	if (isMap(a) && isMap(b)) {
		const ka = Object.keys(a), kb = Object.keys(b);
		return ka.length === kb.length && ka.every((key) => Object.prototype.hasOwnProperty.call(b, key) && equal(a[key], b[key]));
	}
	return false;
}
const typeName = (x) => x === null ? "null" : Array.isArray(x) ? "list" : x instanceof Opt ? "optional" : typeof x === "object" ? "map" : typeof x;

function select(x, f, at) {
	if (x instanceof Opt) return x.has ? selOpt(x.v, f) : NONE;
	if (!isMap(x)) throw new CelError(`${at}: no field ${f} on ${typeName(x)}`);
	if (!Object.prototype.hasOwnProperty.call(x, f)) throw new CelError(`${at}: no such key: ${f}`);
	return x[f];
}
function selOpt(x, f) {
	if (x instanceof Opt) return x.has ? selOpt(x.v, f) : NONE;
	if (isMap(x) && Object.prototype.hasOwnProperty.call(x, f)) return new Opt(true, x[f]);
	if (x === null || x === undefined || isMap(x)) return NONE;
	throw new CelError(`no field ${f} on ${typeName(x)}`);
}
function index(x, i, opt) {
	if (x instanceof Opt) return x.has ? index(x.v, i, true) : NONE;
	if (Array.isArray(x)) {
		if (typeof i !== "number") throw new CelError("list index is not a number");
		if (i < 0 || i >= x.length) { if (opt) return NONE; throw new CelError(`index ${i} out of range`); }
		return opt ? new Opt(true, x[i]) : x[i];
	}
	if (isMap(x)) {
		const key = String(i);
		if (!Object.prototype.hasOwnProperty.call(x, key)) { if (opt) return NONE; throw new CelError(`no such key: ${key}`); }
		return opt ? new Opt(true, x[key]) : x[key];
	}
	throw new CelError(`cannot index ${typeName(x)}`);
}

const MACROS = new Set(["all", "exists", "exists_one", "map", "filter"]);

function evaluate(node, env) {
	const ev = (n, e = env) => evaluate(n, e);
	switch (node.n) {
	case "lit": return node.v;
	case "id":
		if (Object.prototype.hasOwnProperty.call(env, node.v)) return typeof env[node.v] === "function" ? env[node.v]() : env[node.v];
		throw new CelError(`undeclared reference to '${node.v}'`);
	case "list": return node.items.map((x) => ev(x));
	case "map": {
		const o = {};
		for (const en of node.entries) {
			const v = ev(en.v);
			if (en.opt) { if (!(v instanceof Opt)) throw new CelError("optional entry is not optional"); if (v.has) o[ev(en.key)] = v.v; }
			else o[ev(en.key)] = v;
		}
		return o;
	}
	case "struct": {
		if (!/^(Object(\.\w+)*|JSONPatch)$/.test(node.type)) throw new Unsupported(`object type ${node.type}`);
		const o = {};
		for (const f of node.fields) {
			const v = ev(f.v);
			if (f.opt) { if (v.has) o[f.f] = v.v; }
			else o[f.f] = v;
		}
		return o;
	}
	case "sel":
		if (node.f && node.x.n === "id" && node.x.v === "variables") return env.variables(node.f);
		return node.opt ? selOpt(ev(node.x), node.f) : select(ev(node.x), node.f, "select");
	case "idx": return index(ev(node.x), ev(node.i), node.opt);
	case "cond": {
		const c = ev(node.c);
		if (typeof c !== "boolean") throw new CelError("ternary condition is not a bool");
		return c ? ev(node.a) : ev(node.b);
	}
	case "or": case "and": {
		// CEL's commutative logic: a decisive side wins over an error on the other
		const want = node.n === "or";
		let lerr = null, l;
		try { l = ev(node.l); if (typeof l !== "boolean") throw new CelError(`${node.n}: not a bool`); } catch (e) { if (e instanceof Unsupported) throw e; lerr = e; }
		if (!lerr && l === want) return want;
		const r = ev(node.r);
		if (typeof r !== "boolean") throw new CelError(`${node.n}: not a bool`);
		if (r === want) return want;
		if (lerr) throw lerr;
		return !want;
	}
	case "not": { const x = ev(node.x); if (typeof x !== "boolean") throw new CelError("! of a non-bool"); return !x; }
	case "neg": return -ev(node.x);
	case "bin": return binary(node.op, ev(node.l), ev(node.r));
	case "call": return call(node, env);
	default: throw new Unsupported(`node ${node.n}`);
	}
}

function binary(op, a, b) {
	switch (op) {
	case "==": return equal(a, b);
	case "!=": return !equal(a, b);
	case "in":
		if (Array.isArray(b)) return b.some((x) => equal(x, a));
		if (isMap(b)) return Object.prototype.hasOwnProperty.call(b, a);
		throw new CelError(`in: ${typeName(b)}`);
	case "+":
		if (Array.isArray(a) && Array.isArray(b)) return a.concat(b);
		if (typeof a === "string" && typeof b === "string") return a + b;
		if (typeof a === "number" && typeof b === "number") return a + b;
		throw new CelError(`no such overload: ${typeName(a)} + ${typeName(b)}`);
	case "-": case "*": case "/": case "%":
		if (typeof a !== "number" || typeof b !== "number") throw new CelError(`no such overload: ${op}`);
		if (op === "-") return a - b;
		if (op === "*") return a * b;
		if (b === 0) throw new CelError("division by zero");
		return op === "/" ? (Number.isInteger(a) && Number.isInteger(b) ? Math.trunc(a / b) : a / b) : a % b;
	case "<": case "<=": case ">": case ">=":
		if (typeof a !== typeof b || (typeof a !== "number" && typeof a !== "string")) throw new CelError(`no such overload: ${op}`);
		return op === "<" ? a < b : op === "<=" ? a <= b : op === ">" ? a > b : a >= b;
	default: throw new Unsupported(`operator ${op}`);
	}
}

function call(node, env) {
	const ev = (n, e = env) => evaluate(n, e);
	const { f, target } = node;
	if (!target && f === "has") {
		const a = node.args[0];
		if (!a || a.n !== "sel" || a.opt) throw new CelError("has() takes a field selection");
		const x = ev(a.x);
		if (x instanceof Opt) throw new Unsupported("has() on an optional");
		if (!isMap(x)) throw new CelError(`has(): ${typeName(x)} has no fields`);
		return Object.prototype.hasOwnProperty.call(x, a.f) && x[a.f] !== null;
	}
	if (target && MACROS.has(f) && node.args.length >= 2 && node.args[0].n === "id") {
		if (node.args.length === 3 && f !== "map") throw new Unsupported(`two-variable ${f}`);
		const coll = ev(target);
		const items = Array.isArray(coll) ? coll : isMap(coll) ? Object.keys(coll) : null;
		if (!items) throw new CelError(`${f} over ${typeName(coll)}`);
		const v = node.args[0].v;
		const run = (n, x) => evaluate(n, Object.assign(Object.create(null), env, { [v]: x }));
		if (f === "map") {
			const pick = node.args.length === 3 ? items.filter((x) => run(node.args[1], x) === true) : items;
			return pick.map((x) => run(node.args[node.args.length - 1], x));
		}
		if (f === "filter") return items.filter((x) => { const r = run(node.args[1], x); if (typeof r !== "boolean") throw new CelError("filter: not a bool"); return r; });
		if (f === "exists_one") return items.filter((x) => run(node.args[1], x) === true).length === 1;
		// all and exists, with CEL's error absorption
		let err = null;
		for (const x of items) {
			let r;
			try { r = run(node.args[1], x); } catch (e) { if (e instanceof Unsupported) throw e; err = e; continue; }
			if (f === "all" && r === false) return false;
			if (f === "exists" && r === true) return true;
		}
		if (err) throw err;
		return f === "all";
	}
	const a = node.args.map((x) => ev(x));
	if (!target) {
		switch (f) {
		case "size": return sizeOf(a[0]);
		case "string": return typeof a[0] === "string" ? a[0] : typeof a[0] === "number" ? String(a[0]) : typeof a[0] === "boolean" ? String(a[0]) : (() => { throw new CelError("string()"); })();
		case "int": { const n = Number(a[0]); if (!Number.isFinite(n)) throw new CelError("int()"); return Math.trunc(n); }
		case "double": return Number(a[0]);
		case "bool": return a[0] === true || a[0] === "true";
		case "dyn": return a[0];
		default: throw new Unsupported(`function ${f}`);
		}
	}
	// receiver calls; the namespaces optional.* and jsonpatch.* are qualified calls
	const q = target.n === "id" ? target.v : null;
	if (q === "optional" && !Object.prototype.hasOwnProperty.call(env, "optional")) {
		if (f === "of") return new Opt(true, a[0]);
		if (f === "none") return NONE;
		if (f === "ofNonZeroValue") return a[0] === null || a[0] === "" || a[0] === 0 || a[0] === false || (Array.isArray(a[0]) && !a[0].length) || (isMap(a[0]) && !Object.keys(a[0]).length) ? NONE : new Opt(true, a[0]);
		throw new Unsupported(`optional.${f}`);
	}
	if (q === "jsonpatch" && !Object.prototype.hasOwnProperty.call(env, "jsonpatch")) {
		if (f === "escapeKey") return String(a[0]).replace(/~/g, "~0").replace(/\//g, "~1");
		throw new Unsupported(`jsonpatch.${f}`);
	}
	if (q && !Object.prototype.hasOwnProperty.call(env, q)) throw new Unsupported(`function ${q}.${f}`);
	const x = ev(target);
	if (x instanceof Opt) {
		if (f === "orValue") return x.has ? x.v : a[0];
		if (f === "hasValue") return x.has;
		if (f === "value") { if (!x.has) throw new CelError("optional.none() dereference"); return x.v; }
		if (f === "or") return x.has ? x : a[0];
		throw new Unsupported(`optional.${f}()`);
	}
	if (typeof x === "string") {
		switch (f) {
		case "startsWith": return x.startsWith(a[0]);
		case "endsWith": return x.endsWith(a[0]);
		case "contains": return x.includes(a[0]);
		case "matches": return new RegExp(a[0], "u").test(x);
		case "size": return [...x].length;
		case "lowerAscii": return x.replace(/[A-Z]/g, (c) => c.toLowerCase());
		case "upperAscii": return x.replace(/[a-z]/g, (c) => c.toUpperCase());
		case "trim": return x.trim();
		case "split": return a.length > 1 ? (() => { throw new Unsupported("split with a limit"); })() : x.split(a[0]);
		case "replace": if (a.length > 2) throw new Unsupported("replace with a limit"); return x.split(a[0]).join(a[1]);
		case "indexOf": if (a.length > 1) throw new Unsupported("indexOf with an offset"); return x.indexOf(a[0]);
		case "lastIndexOf": return x.lastIndexOf(a[0]);
		case "substring": return x.substring(a[0], a.length > 1 ? a[1] : undefined);
		default: throw new Unsupported(`string.${f}()`);
		}
	}
	if (Array.isArray(x)) {
		switch (f) {
		case "size": return x.length;
		case "indexOf": return x.findIndex((y) => equal(y, a[0]));
		case "lastIndexOf": { for (let i = x.length - 1; i >= 0; i--) if (equal(x[i], a[0])) return i; return -1; }
		case "join": return x.join(a.length ? a[0] : "");
		default: throw new Unsupported(`list.${f}()`);
		}
	}
	if (isMap(x) && f === "size") return Object.keys(x).length;
	throw new Unsupported(`${typeName(x)}.${f}()`);
}

function sizeOf(x) {
	if (typeof x === "string") return [...x].length;
	if (Array.isArray(x)) return x.length;
	if (isMap(x)) return Object.keys(x).length;
	throw new CelError(`size() of ${typeName(x)}`);
}

// Evaluates SRC with the variables of VARS (object, request, ...); variables
// maps a name of `variables.NAME` to its CEL source, evaluated lazily, once.
function run(src, vars, variables = {}) {
	const cache = new Map();
	const env = Object.assign(Object.create(null), vars);
	env.variables = (name) => {
		if (!cache.has(name)) {
			if (!(name in variables)) throw new CelError(`no variable ${name}`);
			cache.set(name, evaluate(parse(variables[name]), env));
		}
		return cache.get(name);
	};
	const v = evaluate(parse(src), env);
	return v instanceof Opt ? (v.has ? v.v : null) : v;
}

module.exports = { run, parse, Unsupported, CelError };
