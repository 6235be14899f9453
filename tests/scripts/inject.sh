#!/bin/sh
# The ways in of deploy/policy/ (issue 23), as the API server and Kyverno
# would run them, on real pods:
#  - the MutatingPolicy, the MutatingAdmissionPolicy and the ClusterPolicy on
#    every pod of tests/deploy/corpus/ (vLLM, KServe, Triton, TGI, Ray
#    Serve), through the model of tests/deploy/inject.cjs: the same pod under
#    each, kept as its author wrote it, valid for the API server, the schema
#    and Pod Security "restricted" (tests/deploy/corpus.cjs);
#  - the referee: each strategic merge and JSON patch the model makes, made
#    again by Kubernetes' own code (kubectl patch, kubectl kustomize);
#  - the model against Kyverno's own test cases (../shared/data/kyverno/tests);
#  - deploy/preview, and the install (kubectl kustomize deploy/, with each
#    policy, the image set once);
#  - broken policies, and issue 13's, must fail the corpus checks.
# Without node and npm, kubectl (with kustomize v5), or shared/, those
# checks are skipped by name. Node's packages as tests/scripts/deploy.sh has
# them (build/deploy-node, from tests/deploy/package-lock.json).
. tests/deploy/lib.sh

KYVERNO_TESTS="$SHARED/data/kyverno/tests"

# The policies do not change with a sanitizer: the plain run checks them.
if [ -n "${SAN:-}" ]; then
	skip "inject: under SAN=$SAN (the plain run checks deploy/policy/)"
	finish
fi

node_setup

if [ -n "$have_node" ]; then
	# --- the three ways in, on the corpus of real pods (tests/deploy/corpus.cjs)
	mkdir -p "$TMP/bad"
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
		done
		[ "$n" -gt 0 ] || bad "the ClusterPolicy model made no strategic merge for the referee"
		# and each JSON patch, by the API server's JSON patch (exactly)
		n=0
		for p in "$TMP"/corpus/jsonpatch-*.pod.json; do
			[ -f "$p" ] || continue
			b=${p%.pod.json}
			n=$((n + 1))
			if kubectl patch --local -f "$p" --type json -p "$(cat "$b.patch.json")" -o json >"$b.kubectl.json" 2>"$b.err"; then ok
			else bad "kubectl patch --type json on $(basename "$b"): $(head -c 300 "$b.err")"; fi
		done
		[ "$n" -ge 10 ] || bad "the models made only $n JSON patches for the referee"
		inj same-all "$TMP/corpus" >"$TMP/referee" 2>&1
		count ok referee "$TMP/referee"
		# a model result that is not Kubernetes' must fail
		b=$(grep -l FallbackToLogsOnError "$TMP"/corpus/jsonpatch-*.want.json | head -n 1)
		sed 's/FallbackToLogsOnError/File/' "$b" >"$TMP/bad-want.json"
		inj same "$TMP/bad-want.json" "${b%.want.json}.kubectl.json" exact >"$TMP/out" 2>&1
		count fail "the referee on a result that is not Kubernetes'" "$TMP/out"
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
	# a Deployment's pod template, and a List: the pods they make
	{
		printf 'apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  selector: {matchLabels: {app: inference}}\n  template:\n'
		sed -n '/^metadata:/,$p' tests/deploy/app-pod.yaml | sed 's/^/    /'
	} >"$TMP/deploy.yaml"
	deploy/preview "$TMP/deploy.yaml" >"$TMP/preview2.yaml" 2>"$TMP/out" || bad "deploy/preview of a Deployment: $(cat "$TMP/out")"
	if [ "$(grep -c 'mountPath: /etc/ld.so.preload' "$TMP/preview2.yaml")" -eq 3 ]; then ok; else bad "deploy/preview of a Deployment: not injected by each way: $(head -c 400 "$TMP/preview2.yaml")"; fi
	if deploy/preview deploy/namespace.yaml >/dev/null 2>"$TMP/out"; then bad "deploy/preview of a file with no pod exited 0"
	elif grep -q 'no Pod, List of pods or workload' "$TMP/out"; then ok
	else bad "deploy/preview of a file with no pod: $(cat "$TMP/out")"; fi
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

	# broken copies, each must fail its checker
	sed 's/GPUGUARD_LIMIT$/GPUGUARD_LIMITS/; s/value: \/run\/gpuguard\/pod/value: \/run\/gpuguard\/region/' \
		deploy/plain/pod.yaml >"$TMP/bad/pod-drift.yaml"
	inj plain tests/deploy/default-ns.yaml tests/deploy/app-pod.yaml "$TMP/bad/pod-drift.yaml" >"$TMP/out" 2>&1
	count fail "the policies against a plain pod that drifted" "$TMP/out"
	# broken policies: the corpus checks must catch each
	cp deploy/policy/*.yaml "$TMP/bad/"
	brk() { # NAME WAY FILE WHAT-THE-FAILURE-SAYS POD...: on those pods of the corpus
		n=$1 w=$2 f=$3 why=$4
		shift 4
		pods=
		for p in "$@"; do pods="$pods tests/deploy/corpus/$p.yaml"; done
		# shellcheck disable=SC2086
		inj corpus --policy "$w=$f" tests/deploy/corpus/namespaces.yaml "$TMP/bad/c-$n" $pods >"$TMP/out" 2>&1
		set -- "$n" "$w" "$f" "$why"
		grep -q "^FAIL .*$4" "$TMP/out" || sed -i 's/^FAIL /not that failure: /' "$TMP/out"
		count fail "the corpus on a broken policy ($1)" "$TMP/out"
	}
	sed 's/runAsNonRoot: true/runAsNonRoot: false/' deploy/policy/clusterpolicy.yaml >"$TMP/bad/cp-root.yaml"
	brk root ClusterPolicy "$TMP/bad/cp-root.yaml" "pss-restricted what it injects" triton
	# issue 23: a startup probe merged whatever the container has
	sed "s/- key: '{{ element.startupProbe != \`null\` }}'/- key: 'false'/" deploy/policy/clusterpolicy.yaml >"$TMP/bad/cp-probe.yaml"
	brk probe ClusterPolicy "$TMP/bad/cp-probe.yaml" "vllm.startupProbe.httpGet is gone" vllm
	sed 's/filter(c, !has(c.startupProbe))/filter(c, true)/' deploy/policy/mutatingpolicy.yaml >"$TMP/bad/mp-probe.yaml"
	brk mp-probe MutatingPolicy "$TMP/bad/mp-probe.yaml" "vllm.startupProbe.httpGet is gone" vllm
	# issue 23: LD_PRELOAD set in the pod spec replaces the image's
	sed "s|Object.spec.containers.env{name: 'GPUGUARD_SHARED', value: '/run/gpuguard/pod'},|&\n          Object.spec.containers.env{name: 'LD_PRELOAD', value: '/opt/gpuguard/lib/libgpuguard.so'},|" \
		deploy/policy/mutatingadmissionpolicy.yaml >"$TMP/bad/map-ld.yaml"
	brk ld-preload MutatingAdmissionPolicy "$TMP/bad/map-ld.yaml" "LD_PRELOAD" vllm
	# issue 23: fsGroup without OnRootMismatch
	sed "s/'OnRootMismatch'/'Always'/" deploy/policy/mutatingadmissionpolicy.yaml >"$TMP/bad/map-fsgroup.yaml"
	brk fsgroup MutatingAdmissionPolicy "$TMP/bad/map-fsgroup.yaml" "OnRootMismatch" kserve
	# issue 23: only nvidia.com/gpu and amd.com/gpu matched
	sed "s/, 'nvidia.com\/gpu.shared'\]/]/; s/|| k.startsWith('nvidia.com\/mig-')//; s/(has(c.resources.claims) \&\& size(c.resources.claims) > 0) ||//" \
		deploy/policy/mutatingpolicy.yaml >"$TMP/bad/mp-gpus.yaml"
	brk gpus MutatingPolicy "$TMP/bad/mp-gpus.yaml" "gives what" kserve triton ray
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
	brk hook ClusterPolicy "$TMP/bad/cp-hook.yaml" "lifecycle" tgi
fi
finish
