# gpuguard: the set-up tests/scripts/deploy.sh and tests/scripts/inject.sh
# share, sourced from the tree's root after tests/scripts/lib.sh's
# counters: where things are, the policies and the corpus of real pods,
# count (validate.cjs's lines into the counters), and node_setup (Node's
# packages from tests/deploy/package-lock.json in build/deploy-node, never
# in the tree).
ROOT=$(pwd)
BUILD=${GG_TEST_BUILD:-$ROOT/build}
# shared/ beside the tree (GG_SHARED: elsewhere, as in a git worktree)
SHARED=${GG_SHARED:-$ROOT/../shared}
CRD="$SHARED/data/kyverno/kyverno.io_clusterpolicies.yaml"
MPCRD="$SHARED/data/kyverno/policies.kyverno.io_mutatingpolicies.yaml"
NODE_DIR="$ROOT/build/deploy-node"
V="$ROOT/tests/deploy/validate.cjs"
. "$ROOT/tests/scripts/lib.sh"
PIDS=
on_exit() { for p in $PIDS; do kill $p 2>/dev/null; done; }

POLICIES="deploy/policy/clusterpolicy.yaml deploy/policy/mutatingpolicy.yaml deploy/policy/mutatingadmissionpolicy.yaml"
# every manifest under deploy/ that the checks see (deploy.sh fails on one
# left out): the API server's rules in inject.sh read them too
MANIFESTS="$POLICIES deploy/plain/pod.yaml deploy/monitoring/service.yaml deploy/namespace.yaml
deploy/monitoring/servicemonitor.yaml deploy/monitoring/prometheusrule.yaml deploy/node/exporter.yaml"
CORPUS="tests/deploy/corpus/vllm.yaml tests/deploy/corpus/kserve.yaml tests/deploy/corpus/triton.yaml
tests/deploy/corpus/tgi.yaml tests/deploy/corpus/ray.yaml"

# counts validate.cjs's lines: WANT ok = each must be ok; WANT fail = at
# least one must be FAIL (a broken copy)
count() {
	want=$1 what=$2 file=$3
	if [ "$want" = ok ]; then
		while IFS= read -r l; do
			case $l in
			ok\ *) ok ;;
			skip\ *)
				skipped=$((skipped + 1))
				echo "$l"
				;;
			*)
				failed=$((failed + 1))
				echo "$l"
				;;
			esac
		done <"$file"
		grep -q . "$file" || bad "$what: the checker printed nothing"
	elif grep -q '^FAIL ' "$file"; then
		ok
	else
		bad "$what: the checker passed a broken copy"
		sed 's/^/    /' "$file"
	fi
}

# Node and the packages, installed once per package-lock.json: sets
# have_node (1, or empty with a skip said), NODE_PATH, val (validate.cjs)
# and, with node, KYVERNO_CRD and KYVERNO_MP_CRD (empty where shared/ has
# no such CRD: validate.cjs then skips the policy's schema by name).
node_setup() {
	have_node=
	if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
		skip "deploy-schemas: no node and npm on this machine (tests/deps.sh installs nodejs and npm)"
	elif ! cmp -s tests/deploy/package-lock.json "$NODE_DIR/package-lock.json" || [ ! -d "$NODE_DIR/node_modules" ]; then
		rm -rf "$NODE_DIR"
		mkdir -p "$NODE_DIR"
		cp tests/deploy/package.json tests/deploy/package-lock.json "$NODE_DIR/"
		if npm ci --prefix "$NODE_DIR" --no-audit --no-fund --loglevel=error >"$TMP/npm.log" 2>&1; then
			have_node=1
		else
			rm -f "$NODE_DIR/package-lock.json"
			skip "deploy-schemas: npm ci of tests/deploy/package-lock.json failed (no registry?): $(tail -n 1 "$TMP/npm.log")"
		fi
	else
		have_node=1
	fi
	export NODE_PATH="$NODE_DIR/node_modules"
	if [ -n "$have_node" ]; then
		if [ -f "$CRD" ]; then export KYVERNO_CRD="$CRD"; else export KYVERNO_CRD=; fi
		if [ -f "$MPCRD" ]; then export KYVERNO_MP_CRD="$MPCRD"; else export KYVERNO_MP_CRD=; fi
	fi
}
val() { node "$V" "$@"; }
