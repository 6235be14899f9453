#!/bin/sh
# deploy/ as Kubernetes, Prometheus and Docker will see it (issue 13):
#  - every manifest against its kind's real schema: npm's kubernetes-models
#    and @kubernetes-models/prometheus-operator, the Kyverno policies against
#    the openAPIV3Schema of Kyverno's CRDs, read from ../shared/data/kyverno/
#    (not kept in the tree), the MutatingAdmissionPolicy against
#    tests/deploy/map-schema.json;
#  - Pod Security "baseline" and "restricted" on the pods (what the policies
#    inject into real pods: tests/scripts/inject.sh);
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
. tests/deploy/lib.sh
TOOL="$BUILD/bin/gpuguard"
MKREGION="$BUILD/tests/tools/mkregion"

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
node_setup

if [ -n "$have_node" ]; then
	# shellcheck disable=SC2086
	val schema $MANIFESTS tests/deploy/app-pod.yaml $CORPUS >"$TMP/schema" 2>&1
	count ok schema "$TMP/schema"
	val pss baseline deploy/plain/pod.yaml >"$TMP/pss" 2>&1
	val pss restricted deploy/plain/pod.yaml >>"$TMP/pss" 2>&1
	count ok pss "$TMP/pss"

	# the policies, the corpus of real pods, the referee, Kyverno's cases,
	# deploy/preview and the install: tests/scripts/inject.sh
	# README's "Use in a pod" and docs/pod-scope.md's "In Kubernetes" quote deploy/
	val readme README.md >"$TMP/readme" 2>&1
	val readme docs/pod-scope.md >>"$TMP/readme" 2>&1
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
