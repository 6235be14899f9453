#!/bin/sh
# deploy/ as Kubernetes, Prometheus and Docker will see it (issue 13):
#  - every manifest against its kind's real schema: npm's kubernetes-models
#    and @kubernetes-models/prometheus-operator, and the Kyverno policy against
#    the openAPIV3Schema of Kyverno's ClusterPolicy CRD, read from
#    ../shared/data/kyverno/ (not kept in the tree);
#  - Pod Security "baseline" and "restricted" on the pods, and on what the
#    policy injects; the policy applied to tests/deploy/app-pod.yaml must give
#    deploy/plain/pod.yaml;
#  - `promtool test rules` over the PrometheusRule, a test for every alert;
#    every metric the rules and the dashboard read is one `gpuguard metrics`
#    prints;
#  - README's snippets are excerpts of deploy/;
#  - the image's build context (`make image-context`): built, installed and
#    copied as the image and its init container would, then probed with
#    `gpuguard check`.
# Deliberately broken copies must fail each checker (the checks can fail).
# Node's packages come from tests/deploy/package-lock.json, installed into
# build/deploy-node (never into the tree). Without node or npm, or promtool,
# or the CRD, those checks are skipped by name.
ROOT=$(pwd)
BUILD=${GG_TEST_BUILD:-$ROOT/build}
TOOL="$BUILD/bin/gpuguard"
MKREGION="$BUILD/tests/tools/mkregion"
# shared/ beside the tree (GG_SHARED: elsewhere, as in a git worktree)
SHARED=${GG_SHARED:-$ROOT/../shared}
CRD="$SHARED/data/kyverno/kyverno.io_clusterpolicies.yaml"
NODE_DIR="$ROOT/build/deploy-node"
V="$ROOT/tests/deploy/validate.cjs"
. "$(dirname "$0")/lib.sh"
PIDS=
on_exit() { for p in $PIDS; do kill $p 2>/dev/null; done; }

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

POLICIES="deploy/policy/clusterpolicy.yaml deploy/policy/mutatingpolicy.yaml deploy/policy/mutatingadmissionpolicy.yaml"
MANIFESTS="$POLICIES deploy/plain/pod.yaml deploy/monitoring/service.yaml deploy/namespace.yaml
deploy/monitoring/servicemonitor.yaml deploy/monitoring/prometheusrule.yaml deploy/node/exporter.yaml"
CORPUS="tests/deploy/corpus/vllm.yaml tests/deploy/corpus/kserve.yaml tests/deploy/corpus/triton.yaml
tests/deploy/corpus/tgi.yaml tests/deploy/corpus/ray.yaml"
MPCRD="$SHARED/data/kyverno/policies.kyverno.io_mutatingpolicies.yaml"
KYVERNO_TESTS="$SHARED/data/kyverno/tests"
# every YAML file under deploy/ is a manifest the schema check sees, but the
# promtool test
for f in $(find deploy -name '*.yaml' | sort); do
	# shellcheck disable=SC2086,SC2116 # one line of words
	case " $(echo $MANIFESTS) deploy/monitoring/rules-test.yaml deploy/kustomization.yaml " in
	*" $f "*) ;;
	*) bad "$f is not checked by tests/scripts/deploy.sh (add it to MANIFESTS)" ;;
	esac
done

# The manifests do not change with a sanitizer: the plain run checks them.
if [ -n "${SAN:-}" ]; then
	skip "deploy: under SAN=$SAN (the plain run checks deploy/)"
	finish
fi

# --- node: the schemas, PSS, the policy, rules, metrics, README -------------
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
val() { node "$V" "$@"; }

if [ -n "$have_node" ]; then
	# without it validate.cjs skips the policy's schema by name
	if [ -f "$CRD" ]; then export KYVERNO_CRD="$CRD"; else export KYVERNO_CRD=; fi
	if [ -f "$MPCRD" ]; then export KYVERNO_MP_CRD="$MPCRD"; else export KYVERNO_MP_CRD=; fi
	# shellcheck disable=SC2086
	val schema $MANIFESTS tests/deploy/app-pod.yaml $CORPUS >"$TMP/schema" 2>&1
	count ok schema "$TMP/schema"
	val pss baseline deploy/plain/pod.yaml >"$TMP/pss" 2>&1
	val pss restricted deploy/plain/pod.yaml >>"$TMP/pss" 2>&1
	count ok pss "$TMP/pss"

	# --- the three ways in, on the corpus of real pods (tests/deploy/corpus.cjs)
	inj() { node tests/deploy/inject.cjs "$@"; }
	# shellcheck disable=SC2086
	inj api-rules $MANIFESTS $CORPUS >"$TMP/api" 2>&1
	count ok "the API server's rules" "$TMP/api"
	sed 's/- name: gpuguard-prom/- name: gpuguard-metrics/' deploy/plain/pod.yaml >"$TMP/port.yaml"
	inj api-rules "$TMP/port.yaml" >"$TMP/out" 2>&1
	count fail "the API server's rules on a port name of 16 characters" "$TMP/out"
	inj plain tests/deploy/default-ns.yaml tests/deploy/app-pod.yaml deploy/plain/pod.yaml >"$TMP/plain" 2>&1
	count ok "the policies on app-pod.yaml" "$TMP/plain"
	# shellcheck disable=SC2086
	inj corpus tests/deploy/corpus/namespaces.yaml "$TMP/corpus" $CORPUS >"$TMP/corpus.out" 2>&1
	count ok corpus "$TMP/corpus.out"
	# shellcheck disable=SC2086
	inj gpu-lists $POLICIES >"$TMP/lists" 2>&1
	inj same-cel deploy/policy/mutatingpolicy.yaml deploy/policy/mutatingadmissionpolicy.yaml >>"$TMP/lists" 2>&1
	# shellcheck disable=SC2086
	inj match-conditions $POLICIES >>"$TMP/lists" 2>&1
	count ok "the policies' GPU lists and CEL" "$TMP/lists"
	sed "s/'amd.com\/gpu', 'nvidia.com\/gpu.shared'\] || k.startsWith/'amd.com\/gpu'] || k.startsWith/" deploy/policy/mutatingpolicy.yaml >"$TMP/mp-list.yaml"
	inj gpu-lists "$TMP/mp-list.yaml" >"$TMP/out" 2>&1
	count fail "a policy whose match condition lost a GPU resource" "$TMP/out"
	sed 's/object != null \&\& has(object.spec) \&\& has(object.spec.containers) \&\&//' deploy/policy/clusterpolicy.yaml >"$TMP/cp-mc.yaml"
	inj match-conditions "$TMP/cp-mc.yaml" >"$TMP/out" 2>&1
	grep -q '^FAIL .*Binding.*an error' "$TMP/out" || sed -i 's/^FAIL /not that failure: /' "$TMP/out"
	count fail "a match condition that errs on a Binding" "$TMP/out"
	sed 's/periodSeconds: 2, timeoutSeconds: 5/periodSeconds: 3, timeoutSeconds: 5/' deploy/policy/mutatingpolicy.yaml >"$TMP/mp-cel.yaml"
	inj same-cel "$TMP/mp-cel.yaml" deploy/policy/mutatingadmissionpolicy.yaml >"$TMP/out" 2>&1
	count fail "a MutatingPolicy whose CEL drifted from the MutatingAdmissionPolicy's" "$TMP/out"
	# what each way made of each pod, against the real schema
	val schema "$TMP"/corpus/*.yaml >"$TMP/schema2" 2>&1
	count ok "schema of the injected corpus" "$TMP/schema2"
	# the pods of the corpus are what the charts render, in every resource form
	for form in 'nvidia.com/gpu:' 'amd.com/gpu:' 'nvidia.com/gpu.shared:' 'nvidia.com/mig-' 'claims:' 'LD_PRELOAD' \
		'startupProbe:' 'httpGet:' 'exec:' 'persistentVolumeClaim:' 'initContainers:' 'postStart:' 'preStop:' 'fsGroup:'; do
		# shellcheck disable=SC2086
		if grep -q -- "$form" $CORPUS; then ok; else bad "no pod of the corpus has $form"; fi
	done

	# kubectl with kustomize 5 (replacements, patches) is what the referee and
	# the install need
	kz_major=$(kubectl version --client 2>/dev/null | sed -n 's/^Kustomize Version: v\([0-9]*\).*/\1/p')
	if ! command -v kubectl >/dev/null 2>&1; then kubectl_ok=; kubectl_why="no kubectl on this machine"
	elif [ "${kz_major:-0}" -lt 5 ]; then kubectl_ok=; kubectl_why="kubectl's kustomize is older than v5 ($(kubectl version --client 2>&1 | tr '\n' ' '))"
	else kubectl_ok=1; fi
	# The referee: each strategic merge the ClusterPolicy model made, by
	# Kubernetes' own code: the API server's (kubectl patch --type strategic;
	# lists of named objects compared in any order, as its merge puts the
	# patch's first) and the kustomize filter Kyverno's patchStrategicMerge
	# runs (kubectl kustomize; exactly).
	if [ -z "$kubectl_ok" ]; then
		skip "deploy-referee: $kubectl_why"
	else
		n=0
		for p in "$TMP"/corpus/merge-*.pod.json; do
			[ -f "$p" ] || continue
			b=${p%.pod.json}
			n=$((n + 1))
			if kubectl patch --local -f "$p" --type strategic -p "$(cat "$b.patch.json")" -o json >"$b.kubectl.json" 2>"$b.err"; then
				ok
			else
				bad "kubectl patch on $(basename "$b"): $(head -c 300 "$b.err")"
			fi
			inj kustomize-dir "$b" "$b.kz" >"$b.err" 2>&1 || bad "$(cat "$b.err")"
			if kubectl kustomize "$b.kz" >"$b.kz.yaml" 2>"$b.err"; then ok; else bad "kubectl kustomize on $(basename "$b"): $(head -c 300 "$b.err")"; fi
			inj same "$b.want.json" "$b.kubectl.json" any-order >>"$TMP/referee" 2>&1
			inj same "$b.want.json" "$b.kz.yaml" exact >>"$TMP/referee" 2>&1
		done
		[ "$n" -gt 0 ] || bad "the ClusterPolicy model made no strategic merge for the referee"
		count ok referee "$TMP/referee"
	fi

	# Kyverno's own test cases, for the model of Kyverno's patches and CEL
	if [ -d "$KYVERNO_TESTS" ]; then
		inj kyverno-cases "$KYVERNO_TESTS" >"$TMP/cases" 2>&1
		grep '^note ' "$TMP/cases"
		grep -v '^note ' "$TMP/cases" >"$TMP/cases2"
		count ok "Kyverno's test cases" "$TMP/cases2"
	else
		skip "kyverno-cases: no Kyverno test cases at ../shared/data/kyverno/tests"
	fi

	# deploy/preview: a Pod per way, each marked with its way
	deploy/preview tests/deploy/corpus/triton.yaml >"$TMP/preview.yaml" 2>"$TMP/preview.err" || bad "deploy/preview: $(cat "$TMP/preview.err")"
	for way in MutatingAdmissionPolicy MutatingPolicy ClusterPolicy; do
		if grep -q "gpuguard.io/injected-by: $way\$" "$TMP/preview.yaml"; then ok; else bad "deploy/preview printed no pod injected by $way"; fi
	done
	val schema "$TMP/preview.yaml" >"$TMP/out" 2>&1
	count ok "schema of deploy/preview's pods" "$TMP/out"
	if deploy/preview /nonexistent.yaml >/dev/null 2>"$TMP/out"; then bad "deploy/preview of a missing file exited 0"
	elif grep -q 'cannot read /nonexistent.yaml' "$TMP/out"; then ok
	else bad "deploy/preview of a missing file: $(cat "$TMP/out")"; fi

	# the one-command install, rendered with each policy; the image set once
	if [ -z "$kubectl_ok" ]; then
		skip "deploy-kustomize: $kubectl_why"
	else
		for pol in mutatingpolicy clusterpolicy mutatingadmissionpolicy; do
			rm -rf "$TMP/kz"
			cp -r deploy "$TMP/kz"
			sed -i "s|^  - policy/mutatingpolicy.yaml\$|  - policy/$pol.yaml|" "$TMP/kz/kustomization.yaml"
			sed -i 's|newName: registry.example.com/gpuguard$|newName: registry.test/team/gpuguard|; s|newTag: .*|newTag: "9.9"|' "$TMP/kz/kustomization.yaml"
			if ! kubectl kustomize "$TMP/kz" >"$TMP/install-$pol.yaml" 2>"$TMP/out"; then
				bad "kubectl kustomize deploy/ with policy/$pol.yaml: $(head -c 300 "$TMP/out")"
				continue
			fi
			for kind in Namespace DaemonSet PodMonitor ServiceMonitor PrometheusRule ConfigMap; do
				if grep -q "^kind: $kind\$" "$TMP/install-$pol.yaml"; then ok; else bad "the install ($pol) has no $kind"; fi
			done
			grep -q '^kind: \(MutatingPolicy\|ClusterPolicy\|MutatingAdmissionPolicy\)$' "$TMP/install-$pol.yaml" || bad "the install ($pol) has no policy"
			# every image reference, and the policy's, is the one kustomization names
			left=$(grep -o 'gpuguard:[0-9][^ '"'"'"]*' "$TMP/install-$pol.yaml" | grep -v '^gpuguard:9\.9$' | sort -u)
			if [ -n "$left" ]; then bad "the install ($pol) still names $left"; else ok; fi
			want=$(grep -c 'registry\.test/team/gpuguard:9\.9' "$TMP/install-$pol.yaml")
			if [ "$want" -ge 2 ]; then ok; else bad "the install ($pol) names the set image $want times (the exporter and the policy)"; fi
			val schema "$TMP/install-$pol.yaml" >"$TMP/out" 2>&1
			count ok "schema of the install ($pol)" "$TMP/out"
			# the policy as installed injects the image set
			node -e 'const Y=require("yaml"),fs=require("fs");for (const d of Y.parseAllDocuments(fs.readFileSync(process.argv[1],"utf8"))) { const x=d.toJS(); if (x && /Polic(y|yBinding)$/.test(x.kind)) fs.appendFileSync(process.argv[2], "---\n"+Y.stringify(x)); }' \
				"$TMP/install-$pol.yaml" "$TMP/pol-$pol.yaml"
			way=$(sed -n 's/^kind: \(MutatingPolicy\|ClusterPolicy\|MutatingAdmissionPolicy\)$/\1/p' "$TMP/pol-$pol.yaml")
			if GG_POLICY_FILE="$way=$TMP/pol-$pol.yaml" inj preview tests/deploy/default-ns.yaml tests/deploy/app-pod.yaml 2>&1 |
				grep -q 'image: registry.test/team/gpuguard:9.9$'; then ok; else bad "the installed $way does not inject the image set"; fi
		done
	fi
	val readme README.md >"$TMP/readme" 2>&1
	count ok readme "$TMP/readme"

	# broken copies, each must fail its checker
	mkdir -p "$TMP/bad"
	sed 's/containerPort: 9479/containerPort: high/' deploy/plain/pod.yaml >"$TMP/bad/pod-schema.yaml"
	sed '/^  volumes:$/a\    - {name: host, hostPath: {path: /opt/gpuguard}}' deploy/plain/pod.yaml >"$TMP/bad/pod-hostpath.yaml"
	sed 's/allowPrivilegeEscalation: false/allowPrivilegeEscalation: true/' deploy/plain/pod.yaml >"$TMP/bad/pod-escalation.yaml"
	sed 's/drop: \[ALL\]/drop: [NET_RAW]/' deploy/plain/pod.yaml >"$TMP/bad/pod-caps.yaml"
	sed 's/runAsNonRoot: true/runAsNonRoot: false/' deploy/plain/pod.yaml >"$TMP/bad/pod-root.yaml"
	sed 's/type: RuntimeDefault/type: Unconfined/' deploy/plain/pod.yaml >"$TMP/bad/pod-seccomp.yaml"
	sed 's/^      securityContext:$/      securityContext:\n        privileged: true/' deploy/plain/pod.yaml >"$TMP/bad/pod-privileged.yaml"
	sed 's/^  background: false$/  background: nope/' deploy/policy/clusterpolicy.yaml >"$TMP/bad/policy-schema.yaml"
	sed 's/^    - port: gpuguard-metrics/    - port: 9479/' deploy/monitoring/servicemonitor.yaml >"$TMP/bad/sm-schema.yaml"
	sed 's/^          for: 10m/          for: ten minutes/' deploy/monitoring/prometheusrule.yaml >"$TMP/bad/rule-schema.yaml"
	sed 's/GPUGUARD_LIMIT$/GPUGUARD_LIMITS/; s/value: \/run\/gpuguard\/pod/value: \/run\/gpuguard\/region/' \
		deploy/plain/pod.yaml >"$TMP/bad/pod-drift.yaml"
	for b in pod-schema sm-schema rule-schema; do
		val schema "$TMP/bad/$b.yaml" >"$TMP/out" 2>&1
		# for a schema reason (a YAML error would not count)
		grep -q 'must be\|must match' "$TMP/out" || sed -i 's/^FAIL /not a schema error: /' "$TMP/out"
		count fail "schema of a broken copy ($b)" "$TMP/out"
	done
	if [ -n "$KYVERNO_CRD" ]; then
		val schema "$TMP/bad/policy-schema.yaml" >"$TMP/out" 2>&1
		count fail "schema of a broken copy (policy-schema)" "$TMP/out"
		# a misspelt field, which the API server would drop without a word
		sed 's/^  webhookConfiguration:$/  webhookConfig:/' deploy/policy/clusterpolicy.yaml >"$TMP/bad/policy-field.yaml"
		val schema "$TMP/bad/policy-field.yaml" >"$TMP/out" 2>&1
		grep -q 'webhookConfig, which the API server would drop' "$TMP/out" || sed -i 's/^FAIL /not that error: /' "$TMP/out"
		count fail "schema of a policy with a misspelt field" "$TMP/out"
	fi
	# a misspelt field, which the API server would drop: the probe, gone
	sed 's/startupProbe:/startupprobe:/' deploy/plain/pod.yaml >"$TMP/bad/pod-field.yaml"
	val schema "$TMP/bad/pod-field.yaml" >"$TMP/out" 2>&1
	grep -q 'startupprobe (the API server would drop it)' "$TMP/out" || sed -i 's/^FAIL /not that error: /' "$TMP/out"
	count fail "schema of a pod with a misspelt field" "$TMP/out"
	sed 's/      affinity:/      afinity:/' deploy/node/exporter.yaml >"$TMP/bad/ds-field.yaml"
	val schema "$TMP/bad/ds-field.yaml" >"$TMP/out" 2>&1
	grep -q 'afinity (the API server would drop it)' "$TMP/out" || sed -i 's/^FAIL /not that error: /' "$TMP/out"
	count fail "schema of the node exporter with a misspelt field" "$TMP/out"
	val pss baseline "$TMP/bad/pod-hostpath.yaml" >"$TMP/out" 2>&1
	count fail "pss-baseline of a pod with a hostPath" "$TMP/out"
	val pss baseline "$TMP/bad/pod-privileged.yaml" >"$TMP/out" 2>&1
	count fail "pss-baseline of a privileged pod" "$TMP/out"
	val pss baseline "$TMP/bad/pod-seccomp.yaml" >"$TMP/out" 2>&1
	count fail "pss-baseline of an Unconfined pod" "$TMP/out"
	for b in pod-escalation pod-caps pod-root; do
		val pss restricted "$TMP/bad/$b.yaml" >"$TMP/out" 2>&1
		count fail "pss-restricted of a broken copy ($b)" "$TMP/out"
	done
	inj plain tests/deploy/default-ns.yaml tests/deploy/app-pod.yaml "$TMP/bad/pod-drift.yaml" >"$TMP/out" 2>&1
	count fail "the policies against a plain pod that drifted" "$TMP/out"
	# broken policies: the corpus checks must catch each
	cp deploy/policy/*.yaml "$TMP/bad/"
	brk() { # NAME WAY FILE WHAT-THE-FAILURE-SAYS
		inj corpus --policy "$2=$3" tests/deploy/corpus/namespaces.yaml "$TMP/bad/c-$1" $CORPUS >"$TMP/out" 2>&1
		grep -q "^FAIL .*$4" "$TMP/out" || sed -i 's/^FAIL /not that failure: /' "$TMP/out"
		count fail "the corpus on a broken policy ($1)" "$TMP/out"
	}
	sed 's/runAsNonRoot: true/runAsNonRoot: false/' deploy/policy/clusterpolicy.yaml >"$TMP/bad/cp-root.yaml"
	brk root ClusterPolicy "$TMP/bad/cp-root.yaml" "pss-restricted what it injects"
	# issue 23: a startup probe merged whatever the container has
	sed "s/- key: '{{ element.startupProbe != \`null\` }}'/- key: 'false'/" deploy/policy/clusterpolicy.yaml >"$TMP/bad/cp-probe.yaml"
	brk probe ClusterPolicy "$TMP/bad/cp-probe.yaml" "startup probe was replaced"
	sed 's/filter(c, !has(c.startupProbe))/filter(c, true)/' deploy/policy/mutatingpolicy.yaml >"$TMP/bad/mp-probe.yaml"
	brk mp-probe MutatingPolicy "$TMP/bad/mp-probe.yaml" "startup probe was replaced"
	# issue 23: LD_PRELOAD set in the pod spec replaces the image's
	sed "s|Object.spec.containers.env{name: 'GPUGUARD_SHARED', value: '/run/gpuguard/pod'},|&\n          Object.spec.containers.env{name: 'LD_PRELOAD', value: '/opt/gpuguard/lib/libgpuguard.so'},|" \
		deploy/policy/mutatingadmissionpolicy.yaml >"$TMP/bad/map-ld.yaml"
	brk ld-preload MutatingAdmissionPolicy "$TMP/bad/map-ld.yaml" "LD_PRELOAD"
	# issue 23: fsGroup without OnRootMismatch
	sed "s/'OnRootMismatch'/'Always'/" deploy/policy/mutatingadmissionpolicy.yaml >"$TMP/bad/map-fsgroup.yaml"
	brk fsgroup MutatingAdmissionPolicy "$TMP/bad/map-fsgroup.yaml" "OnRootMismatch"
	# issue 23: only nvidia.com/gpu and amd.com/gpu matched
	sed "s/, 'nvidia.com\/gpu.shared'\]/]/; s/|| k.startsWith('nvidia.com\/mig-')//; s/(has(c.resources.claims) \&\& size(c.resources.claims) > 0) ||//" \
		deploy/policy/mutatingpolicy.yaml >"$TMP/bad/mp-gpus.yaml"
	brk gpus MutatingPolicy "$TMP/bad/mp-gpus.yaml" "gives what"
	# issue 13's policy, as issue 23 found it on real pods
	inj corpus --policy ClusterPolicy=tests/deploy/issue13-clusterpolicy.yaml tests/deploy/corpus/namespaces.yaml "$TMP/bad/c-13" $CORPUS >"$TMP/out" 2>&1
	for finding in 'vllm by ClusterPolicy: .*startupProbe has 2 handlers (exec, httpGet)' \
		'vllm by ClusterPolicy: .*startupProbe.failureThreshold: 60 became 30' \
		'vllm: ClusterPolicy gives .*libtcmalloc_minimal.so.4' \
		'.*port name gpuguard-metrics is not IANA_SVC_NAME' \
		'tgi by ClusterPolicy: .*fsGroup 65532 with fsGroupChangePolicy undefined' \
		'kserve by ClusterPolicy: .*GPUGUARD_LIMIT undefined' 'triton by ClusterPolicy: .*GPUGUARD_LIMIT undefined' \
		'ray by ClusterPolicy: .*GPUGUARD_LIMIT undefined'; do
		if grep -q "^FAIL $finding" "$TMP/out"; then ok; else bad "issue 13's policy on the corpus: no failure $finding"; fi
	done
	# a container's own postStart hook replaced
	sed "s/- key: '{{ element.startupProbe != \`null\` \&\& element.lifecycle != \`null\` \&\& element.lifecycle.postStart == \`null\` }}'/- key: '{{ element.startupProbe != \`null\` }}'/" \
		deploy/policy/clusterpolicy.yaml >"$TMP/bad/cp-hook.yaml"
	brk hook ClusterPolicy "$TMP/bad/cp-hook.yaml" "lifecycle"
	sed 's/^      image: my-inference-image$/      image: another-image/' README.md >"$TMP/bad/README.md"
	(cd "$ROOT" && val readme "$TMP/bad/README.md") >"$TMP/out" 2>&1
	grep -q 'image: my-inference-image' README.md || bad "README's snippet names no image line to break"
	count fail "a README snippet that is not an excerpt" "$TMP/out"

	# the metrics the rules and the dashboard read, against a sample region
	if [ -x "$TOOL" ] && [ -x "$MKREGION" ]; then
		"$MKREGION" "$TMP/region" limit=20Gi proc=0:42:python3:1700000000000:0=4096 proc=1:43:python3:1700000000000 \
			procstate=1:free dev=0:cuda:00112233445566778899aabbccddeeff:21474836480:4096:8192:85899345920:1:2:3 \
			death=0:1:4242:vllm:1700000090000:1700000089600:1048576000:1073741824:0:none:16965120819:17179869184:6 \
			>"$TMP/mk.log" 2>&1 || bad "mkregion: $(cat "$TMP/mk.log")"
		"$TOOL" metrics --region "$TMP/region" >"$TMP/metrics.txt" 2>&1 || bad "gpuguard metrics: $(cat "$TMP/metrics.txt")"
		# and the node exporter's over the same region (its node alert)
		mkdir -p "$TMP/kp/0c1d2e3f-1111-4a4a-8b8b-000000000001/volumes/kubernetes.io~empty-dir/r"
		cp "$TMP/region" "$TMP/kp/0c1d2e3f-1111-4a4a-8b8b-000000000001/volumes/kubernetes.io~empty-dir/r/pod"
		NODE_NAME=gpu-node-1 "$TOOL" metrics --discover "$TMP/kp" >>"$TMP/metrics.txt" 2>&1 ||
			bad "gpuguard metrics --discover: $(cat "$TMP/metrics.txt")"
		val metrics "$TMP/metrics.txt" deploy/monitoring/dashboard.json deploy/monitoring/prometheusrule.yaml >"$TMP/out" 2>&1
		count ok metrics "$TMP/out"
		sed 's/gpuguard_device_waiters/gpuguard_device_waiting/' deploy/monitoring/dashboard.json >"$TMP/bad/dashboard.json"
		val metrics "$TMP/metrics.txt" "$TMP/bad/dashboard.json" >"$TMP/out" 2>&1
		count fail "a dashboard reading a metric not exported" "$TMP/out"
		sed 's/"panels": \[/"panels": [ {/' deploy/monitoring/dashboard.json >"$TMP/bad/dashboard-parse.json"
		val metrics "$TMP/metrics.txt" "$TMP/bad/dashboard-parse.json" >"$TMP/out" 2>&1
		count fail "a dashboard that does not parse" "$TMP/out"
		sed 's/by (namespace, pod, UUID)/by (namespace, pod, modelName)/' deploy/monitoring/dashboard.json >"$TMP/bad/dashboard-label.json"
		val metrics "$TMP/metrics.txt" "$TMP/bad/dashboard-label.json" >"$TMP/out" 2>&1
		grep -q '^FAIL labels.*: modelName' "$TMP/out" || sed -i 's/^FAIL /not that error: /' "$TMP/out"
		count fail "a dashboard grouping by a label not exported" "$TMP/out"
	else
		skip "deploy-metrics: needs $TOOL and $MKREGION (make all)"
	fi

	# the alerts
	if command -v promtool >/dev/null 2>&1; then
		mkdir -p "$TMP/rules"
		val rules deploy/monitoring/prometheusrule.yaml "$TMP/rules/rules.yaml" >"$TMP/out" 2>&1
		count ok rules "$TMP/out"
		cp deploy/monitoring/rules-test.yaml "$TMP/rules/"
		if promtool check rules "$TMP/rules/rules.yaml" >"$TMP/out" 2>&1 &&
			promtool test rules "$TMP/rules/rules-test.yaml" >>"$TMP/out" 2>&1; then
			ok
		else
			bad "promtool test rules deploy/monitoring/rules-test.yaml"
			sed 's/^/    /' "$TMP/out" | tail -n 40
		fi
		# an alert that no longer fires as tested must fail it
		sed 's/> 0.9$/> 0.99/' deploy/monitoring/prometheusrule.yaml >"$TMP/bad/rule.yaml"
		mkdir -p "$TMP/badrules"
		val rules "$TMP/bad/rule.yaml" "$TMP/badrules/rules.yaml" >/dev/null 2>&1
		cp deploy/monitoring/rules-test.yaml "$TMP/badrules/"
		if promtool test rules "$TMP/badrules/rules-test.yaml" >/dev/null 2>&1; then
			bad "promtool test rules passed an alert changed from 0.9 to 0.99"
		else
			ok
		fi
	else
		skip "promtool-test-rules: no promtool on this machine (Debian package prometheus)"
	fi
fi

# --- the image's build context ---------------------------------------------
# staged into this run's own directory (another run may be staging too)
IC="$TMP/image-context"
if ! env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS make -s image-context IMAGE_CONTEXT="$IC" >"$TMP/ic.log" 2>&1; then
	bad "make image-context: $(tail -n 3 "$TMP/ic.log")"
else
	for f in Dockerfile install.sh src/Makefile src/LICENSE src/include/gpuguard/parse.h src/tools/main.c \
		src/include/gpuguard.h src/interpose/exports.map; do
		if [ -f "$IC/$f" ]; then ok; else bad "image context lacks $f"; fi
	done
	# each COPY source of the Dockerfile's stages is in the context
	for s in $(sed -n 's/^COPY \([^-][^ ]*\) .*/\1/p' "$IC/Dockerfile"); do
		if [ -e "$IC/$s" ]; then ok; else bad "the Dockerfile copies $s, not in the image context"; fi
	done
	# the build stage, as the Dockerfile runs it (no sanitizer: the shipped build)
	grep -q '^RUN make -C /src image-stage DESTDIR=/stage$' "$IC/Dockerfile" ||
		bad "the Dockerfile's build stage is not make image-stage: this test no longer builds what it builds"
	if ! (cd "$IC/src" && env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS -u SAN -u CFLAGS \
		nice -n 10 make -s -j2 BUILD="$TMP/img-build" image-stage DESTDIR="$TMP/stage") >"$TMP/img.log" 2>&1; then
		bad "building the image context: $(tail -n 5 "$TMP/img.log")"
	else
		root="$TMP/stage/opt/gpuguard"
		for f in lib/libgpuguard.so bin/gpuguard; do
			if [ -f "$root/$f" ]; then ok; else bad "the image would lack /opt/gpuguard/$f"; fi
		done
		# the command runs in any image: no program interpreter (static)
		if readelf -l "$root/bin/gpuguard" 2>/dev/null | grep -q 'Requesting program interpreter'; then
			bad "the image's gpuguard is dynamically linked: the probe would need the application image's glibc to be as new as the build's"
		else
			ok
		fi
		[ -d "$root/include" ] && bad "the image would carry the headers"
		# the library loads as staged
		out=$(LD_PRELOAD="$root/lib/libgpuguard.so" true 2>&1)
		if [ -z "$out" ]; then ok; else bad "LD_PRELOAD of the staged library: $out"; fi
		# the init container's copy step into an emptyDir, then the probe
		if GPUGUARD_IMAGE_ROOT="$root" sh "$IC/install.sh" "$TMP/emptydir" >"$TMP/inst.log" 2>&1 &&
			grep -q '^gpuguard install: gpuguard .* into ' "$TMP/inst.log"; then
			ok
		else
			bad "install.sh: $(cat "$TMP/inst.log")"
		fi
		# the file each GPU container mounts at /etc/ld.so.preload names the
		# library where the container mounts the copy
		if [ "$(cat "$TMP/emptydir/ld.so.preload" 2>&1)" = /opt/gpuguard/lib/libgpuguard.so ]; then ok; else bad "install.sh wrote ld.so.preload: $(cat "$TMP/emptydir/ld.so.preload" 2>&1)"; fi
		GPUGUARD_IMAGE_ROOT="$root" sh "$IC/install.sh" "$TMP/emptydir4" /mnt/gg >/dev/null 2>&1
		if [ "$(cat "$TMP/emptydir4/ld.so.preload" 2>&1)" = /mnt/gg/lib/libgpuguard.so ]; then ok; else bad "install.sh DEST /mnt/gg wrote ld.so.preload: $(cat "$TMP/emptydir4/ld.so.preload" 2>&1)"; fi
		if GPUGUARD_IMAGE_ROOT="$root" sh "$IC/install.sh" "$TMP/emptydir5" relative/path >"$TMP/out" 2>&1; then bad "install.sh with a relative MOUNT exited 0"
		elif grep -q 'MOUNT must be an absolute path, not "relative/path"' "$TMP/out"; then ok
		else bad "install.sh with a relative MOUNT: $(cat "$TMP/out")"; fi
		env LD_PRELOAD="$TMP/emptydir/lib/libgpuguard.so" GPUGUARD_LIMIT=20Gi sleep 30 >/dev/null 2>&1 &
		pid=$!
		PIDS="$PIDS $pid"
		i=0
		while ! "$TMP/emptydir/bin/gpuguard" check $pid >"$TMP/check.out" 2>&1 && [ $i -lt 100 ]; do
			sleep 0.05
			i=$((i + 1))
		done
		if grep -q 'runs with libgpuguard, GPUGUARD_LIMIT=20Gi' "$TMP/check.out"; then
			ok
		else
			bad "the copied gpuguard check on a process with the copied library: $(cat "$TMP/check.out")"
		fi
		kill $pid 2>/dev/null
		# the copy step fails closed on a library that does not load
		mkdir -p "$TMP/broken/lib" "$TMP/broken/bin"
		head -c 100 "$root/lib/libgpuguard.so" >"$TMP/broken/lib/libgpuguard.so"
		cp "$root/bin/gpuguard" "$TMP/broken/bin/"
		if GPUGUARD_IMAGE_ROOT="$TMP/broken" sh "$IC/install.sh" "$TMP/emptydir2" >"$TMP/inst2.log" 2>&1; then
			bad "install.sh copied a library that does not load and exited 0"
		elif grep -q 'does not load' "$TMP/inst2.log"; then
			ok
		else
			bad "install.sh on a broken library: $(cat "$TMP/inst2.log")"
		fi
		if GPUGUARD_IMAGE_ROOT="$TMP/nothing" sh "$IC/install.sh" "$TMP/emptydir3" >/dev/null 2>&1; then
			bad "install.sh with nothing to copy exited 0"
		else
			ok
		fi
	fi
fi

# one image everywhere, tagged with the version the command reports: the
# manifests, the Dockerfile's and the Makefile's build line, README's
if [ -x "$TOOL" ]; then
	version=$("$TOOL" version | sed -n 's/^gpuguard \([^ ]*\).*/\1/p')
	image="registry.example.com/gpuguard:$version"
	# the manifests name it gpuguard:VERSION, which deploy/kustomization.yaml maps
	refs=$(grep -ho 'gpuguard:[0-9][^ '"'"'"]*' $POLICIES deploy/plain/pod.yaml deploy/node/exporter.yaml | sort -u)
	if [ "$refs" = "gpuguard:$version" ]; then ok; else bad "the manifests name the image as $(echo "$refs" | tr '\n' ' '), not gpuguard:$version"; fi
	kz=$(sed -n 's/^    newName: \(.*\)$/\1/p; s/^    newTag: \(.*\)$/\1/p' deploy/kustomization.yaml | tr '\n' :)
	if [ "$kz" = "registry.example.com/gpuguard:$version:" ]; then ok; else bad "deploy/kustomization.yaml sets the image to $kz, not $image"; fi
	refs=$(grep -ho 'registry\.example\.com/gpuguard[^ ]*' deploy/image/Dockerfile Makefile README.md docs/deploy.md | sort | uniq -c)
	if [ "$(echo "$refs" | wc -l)" -eq 1 ] && echo "$refs" | grep -q " $image\$"; then
		ok
	else
		bad "the image is not $image everywhere: $(echo "$refs" | tr '\n' ' ')"
	fi
fi

# every GPUGUARD_* variable the manifests set is one README documents
for v in $(grep -ho 'GPUGUARD_[A-Z][A-Z_]*' $POLICIES deploy/plain/pod.yaml | sort -u); do
	case $v in GPUGUARD_IMAGE_ROOT) continue ;; esac
	if grep -q "^| \`$v\` |" README.md; then ok; else bad "the manifests set $v, which README's options table does not document"; fi
done

finish
